package executor

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hpcq/hpcq/pkg/queue"
)

// Toolchains is what a worker found on its machine.
type Toolchains struct {
	// Versions maps a toolchain name to its version: gcc, g++, clang,
	// gfortran, mpicc, mpirun, mpi (the implementation: "Open MPI 4.1.4"),
	// nvcc, make, cmake, python3, openmp (the compilers whose -fopenmp probe compiled
	// and ran with 2 threads: "gcc,clang"), gpu (the number of GPUs).
	Versions map[string]string
	// GPUs from nvidia-smi.
	GPUs []queue.GPUDevice
	// Notes say what a probe printed that could not be read.
	Notes []string
}

// detectScript runs every probe in one login shell (so that environment
// modules loaded by the profile count, and a slow profile is paid once).
// Each section starts with "@@hpcq NAME" and ends with "@@rc CODE".
const detectScript = `
probe() {
  name=$1; shift
  out=$("$@" 2>&1); rc=$?
  echo "@@hpcq $name"; printf '%s\n' "$out" | head -n 8; echo "@@rc $rc"
}
for t in gcc g++ clang gfortran nvcc make cmake python3; do
  command -v "$t" >/dev/null 2>&1 && probe "$t" "$t" --version
done
command -v mpicc >/dev/null 2>&1 && probe mpicc mpicc --version
command -v mpirun >/dev/null 2>&1 && probe mpirun mpirun --version
command -v nvidia-smi >/dev/null 2>&1 && probe nvidia-smi nvidia-smi --query-gpu=index,name,memory.total,compute_cap --format=csv,noheader,nounits
command -v nvidia-smi >/dev/null 2>&1 && probe nvidia-smi-L nvidia-smi -L
command -v nvidia-smi >/dev/null 2>&1 && { out=$(nvidia-smi -q -x 2>&1); rc=$?; echo "@@hpcq nvidia-smi-x"; printf '%s\n' "$out" | grep -v '^@@'; echo "@@rc $rc"; }
d=$(mktemp -d) || exit 0
cat > "$d/p.c" <<'C'
#include <omp.h>
#include <stdio.h>
int main(void) { int n = 0;
#pragma omp parallel reduction(+:n)
  n++;
  printf("%d\n", n); return 0; }
C
for cc in gcc clang; do
  command -v "$cc" >/dev/null 2>&1 && probe "openmp-$cc" sh -c "cd '$d' && $cc -fopenmp -o p-$cc p.c && OMP_NUM_THREADS=2 ./p-$cc"
done
rm -rf "$d"
`

var (
	versionRe = regexp.MustCompile(`\d+\.\d+(?:\.\d+)?`)
	nvccRe    = regexp.MustCompile(`release (\d+\.\d+)`)
	openMPIRe = regexp.MustCompile(`Open MPI\)? (\d+\.\d+(?:\.\d+)?)`)
	mpichRe   = regexp.MustCompile(`Version:\s+(\d+\.\d+(?:\.\d+)?)`)
)

// DetectToolchains probes the machine in env, the environment commands run
// in (WorkerEnv; with login, in a login shell). It never fails: what cannot
// be probed is absent, and the reason is logged.
func DetectToolchains(ctx context.Context, env []string, login bool, log *slog.Logger) Toolchains {
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var out strings.Builder
	c := NewCapture(1 << 20)
	o, err := Run(ctx, Command{Line: detectScript, Env: env, Stdout: c, Stderr: c, KillGrace: time.Second, Login: login})
	if err != nil || o.TimedOut {
		log.Warn("toolchain detection failed", "err", err, "timed_out", o.TimedOut)
	}
	out.WriteString(c.String())
	t := parseDetection(out.String())
	log.Info("toolchains detected", "toolchains", t.Versions, "gpus", len(t.GPUs))
	for _, n := range t.Notes {
		log.Warn("toolchain detection: " + n)
	}
	return t
}

// parseDetection reads detectScript's output.
//
// Long: one case per line kind of detectScript's output.
func parseDetection(s string) Toolchains {
	t := Toolchains{Versions: map[string]string{}}
	sections := map[string][]string{}
	codes := map[string]int{}
	var cur string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "@@hpcq "):
			cur = strings.TrimPrefix(line, "@@hpcq ")
		case strings.HasPrefix(line, "@@rc ") && cur != "":
			codes[cur], _ = strconv.Atoi(strings.TrimPrefix(line, "@@rc "))
			cur = ""
		case cur != "":
			sections[cur] = append(sections[cur], line)
		}
	}
	ok := func(name string) ([]string, bool) {
		lines, found := sections[name]
		return lines, found && codes[name] == 0 && len(lines) > 0
	}
	for _, name := range []string{"gcc", "g++", "clang", "gfortran", "make", "cmake", "python3"} {
		if lines, found := ok(name); found {
			if v := versionRe.FindString(lines[0]); v != "" {
				t.Versions[name] = v
			}
		}
	}
	if lines, found := ok("nvcc"); found {
		if m := nvccRe.FindStringSubmatch(strings.Join(lines, "\n")); m != nil {
			t.Versions["nvcc"] = m[1]
		}
	}
	if lines, found := ok("mpicc"); found {
		if v := versionRe.FindString(lines[0]); v != "" {
			t.Versions["mpicc"] = v
		}
	}
	if lines, found := ok("mpirun"); found {
		all := strings.Join(lines, "\n")
		switch {
		case openMPIRe.MatchString(all):
			v := openMPIRe.FindStringSubmatch(all)[1]
			t.Versions["mpirun"], t.Versions["mpi"] = v, "Open MPI "+v
		case strings.Contains(all, "HYDRA") || strings.Contains(strings.ToLower(all), "mpich"):
			v := ""
			if m := mpichRe.FindStringSubmatch(all); m != nil {
				v = m[1]
			}
			t.Versions["mpirun"], t.Versions["mpi"] = v, strings.TrimSpace("MPICH "+v)
		default:
			if v := versionRe.FindString(all); v != "" {
				t.Versions["mpirun"], t.Versions["mpi"] = v, "unknown MPI "+v
			}
		}
	}
	var omp []string
	for _, cc := range []string{"gcc", "clang"} {
		if lines, found := ok("openmp-" + cc); found && strings.TrimSpace(lines[len(lines)-1]) == "2" {
			omp = append(omp, cc)
		}
	}
	if len(omp) > 0 {
		t.Versions["openmp"] = strings.Join(omp, ",")
	}
	var query []queue.GPUDevice
	if lines, found := ok("nvidia-smi"); found {
		query = parseGPUQuery(lines)
	}
	listed := map[string]queue.GPUDevice{}
	if lines, found := ok("nvidia-smi-L"); found {
		listed = parseGPUList(lines)
	}
	var smi smiLog
	if lines, found := ok("nvidia-smi-x"); found {
		var err error
		if smi, err = parseSMIXML(strings.Join(lines, "\n")); err != nil {
			t.Notes = append(t.Notes, err.Error())
		}
	}
	t.GPUs = mergeGPUs(query, listed, smi)
	if len(t.GPUs) > 0 {
		t.Versions["gpu"] = fmt.Sprint(len(t.GPUs))
	}
	return t
}

// GPUIDs are the device ids a worker hands to its slots: those of
// CUDA_VISIBLE_DEVICES when it is set (Slurm sets it to the job's GPUs),
// otherwise the indexes nvidia-smi reported, a split GPU's MIG instances
// (by UUID) in its place.
func GPUIDs(t Toolchains, visible string) []string {
	if visible = strings.TrimSpace(visible); visible != "" {
		var ids []string
		for _, id := range strings.Split(visible, ",") {
			if id = strings.TrimSpace(id); id != "" {
				ids = append(ids, id)
			}
		}
		return ids
	}
	ids := make([]string, 0, len(t.GPUs))
	for _, g := range t.GPUs {
		if len(g.MIG) == 0 {
			ids = append(ids, g.Index)
		}
		for _, m := range g.MIG {
			ids = append(ids, m.UUID)
		}
	}
	return ids
}
