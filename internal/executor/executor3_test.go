package executor

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/artifacts"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

func requireGCC(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not found: this test compiles C code")
	}
}

func TestCompileErrorDiagnostics(t *testing.T) {
	requireGCC(t)
	e := newExec(t)
	task := cTask("diag")
	task.Artifacts.Coding.Workspace.Files = []schema.File{{Path: "src/main.c", Content: "int main(void) {\n  int x;\n  return y;\n}\n"}}
	task.Artifacts.Compile.Commands = []string{"gcc -Wall -c src/main.c -o main.o"}
	res, err := e.Execute(context.Background(), task, worker.Slot{})
	require.NoError(t, err)
	require.Equal(t, schema.ErrKindCompileFailed, res.Error.Kind)
	require.NotEmpty(t, res.Diagnostics)
	d := res.Diagnostics[0]
	require.Equal(t, "src/main.c", d.File)
	require.Equal(t, 3, d.Line)
	require.Equal(t, 10, d.Column)
	require.Equal(t, "error", d.Severity)
	require.Regexp(t, `^['‘]y['’] undeclared`, d.Message) // gcc quotes per locale
	require.Contains(t, res.Error.Message, "first diagnostic: src/main.c:3:10: error: ")
}

func TestToolchainMissingAndArtifactsJSON(t *testing.T) {
	e := newExec(t)
	task := cTask("nocc")
	task.Artifacts.Compile.Commands = []string{"no-such-compiler -O2 main.c"}
	res, err := e.Execute(context.Background(), task, worker.Slot{})
	require.NoError(t, err)
	require.Equal(t, schema.ErrKindToolchainMissing, res.Error.Kind)
	require.Contains(t, res.Error.Message, "command not found")
	require.Contains(t, res.Error.Message, "no-such-compiler")

	data, err := os.ReadFile(filepath.Join(e.LogDir(task), "artifacts.json"))
	require.NoError(t, err)
	var got schema.Artifacts
	require.NoError(t, json.Unmarshal(data, &got))
	require.Equal(t, task.Artifacts, got, "artifacts.json holds the artifacts as received")
}

func TestMetricsAndBadMetrics(t *testing.T) {
	e := newExec(t)
	ok := cTask("metrics")
	ok.Artifacts.Compile.Commands = nil
	ok.Artifacts.Run = schema.RunPhase{
		Commands:       []string{`echo 'METRIC gflops=12.5 GFLOP/s'; echo 'iterations done: 400'; echo '{"gflops": 13, "energy_j": {"value": 2.5, "unit": "J"}}' > metrics.json`},
		MetricPatterns: []schema.MetricPattern{{Name: "iterations", Regex: `iterations done: (\d+)`}},
	}
	res, err := e.Execute(context.Background(), ok, worker.Slot{})
	require.NoError(t, err)
	require.Nil(t, res.Error)
	require.Equal(t, map[string]float64{"gflops": 13, "energy_j": 2.5, "iterations": 400}, res.Metrics, "metrics.json first")
	require.Equal(t, map[string]string{"energy_j": "J"}, res.MetricUnits)

	bad := cTask("badmetric")
	bad.Artifacts.Compile.Commands = nil
	bad.Artifacts.Run = schema.RunPhase{Commands: []string{`echo 'METRIC gflops=fast'; echo 'METRIC time_s=nan s'`}}
	res, err = e.Execute(context.Background(), bad, worker.Slot{})
	require.NoError(t, err)
	require.Equal(t, schema.ErrKindBadMetric, res.Error.Kind)
	require.Contains(t, res.Error.Message, `metric gflops: "fast" is not a finite number`)
	require.Contains(t, res.Error.Message, `metric time_s: "nan"`)
}

func TestSlotGPUsReachTheTask(t *testing.T) {
	e := newExec(t)
	task := cTask("gpus")
	task.Artifacts.Compile.Commands = nil
	task.Artifacts.Run = schema.RunPhase{Commands: []string{`echo "cuda=$CUDA_VISIBLE_DEVICES omp=$OMP_NUM_THREADS"`}}
	res, err := e.Execute(context.Background(), task, worker.Slot{Cores: 4, GPUs: []string{"2", "3"}})
	require.NoError(t, err)
	require.Contains(t, res.Phases[len(res.Phases)-1].LogTail, "cuda=2,3 omp=4")
}

func TestForkingLoopKilledAtTimeout(t *testing.T) {
	e := newExec(t)
	task := cTask("forker")
	task.Artifacts.Compile.Commands = nil
	// Forks a child every 10 ms, each child sleeping on; loops forever.
	// The pids are those of the sandbox's namespace; the processes are
	// found by a marker in their command line.
	marker := fmt.Sprintf("hpcq-forker-%d-%d", os.Getpid(), time.Now().UnixNano())
	task.Artifacts.Run = schema.RunPhase{Commands: []string{`while :; do (echo $BASHPID >> pids; exec -a ` + marker + ` sleep 1000) & sleep 0.01; done`}}
	task.Limits.RunTimeoutS = 1
	start := time.Now()
	res, err := e.Execute(context.Background(), task, worker.Slot{})
	require.NoError(t, err)
	require.Equal(t, schema.ErrKindTimeout, res.Error.Kind)
	require.Less(t, time.Since(start), 30*time.Second)
	f, err := os.Open(filepath.Join(e.WorkspaceDir(task), "pids"))
	require.NoError(t, err)
	defer f.Close()
	var pids []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pid, err := strconv.Atoi(strings.TrimSpace(sc.Text()))
		require.NoError(t, err)
		pids = append(pids, pid)
	}
	require.Greater(t, len(pids), 5)
	testutil.RequireNoProcessWith(t, marker)
}

// vmHWM is the peak resident set of this process, in KiB.
func vmHWM(t *testing.T) int {
	data, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			n, err := strconv.Atoi(strings.Fields(l)[1])
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// TestOutputFloodStaysBounded: 1 GiB on stdout and 256 MiB on stderr go
// through a run with 8 MiB kept per stream; the worker's peak RSS grows by
// less than 64 MiB (256 MiB under the race detector, whose shadow memory
// multiplies the heap).
func TestOutputFloodStaysBounded(t *testing.T) {
	e := newExec(t)
	task := cTask("flood")
	task.Artifacts.Compile.Commands = nil
	task.Artifacts.Run = schema.RunPhase{Commands: []string{`head -c 268435456 /dev/zero >&2 & head -c 1073741824 /dev/zero | tr '\0' 'y'; wait; echo; echo 'METRIC done=1'`}}
	task.Limits.MaxOutputBytes = 8 << 20
	// Reset the peak RSS counter, so the measure is of this run.
	require.NoError(t, os.WriteFile("/proc/self/clear_refs", []byte("5"), 0))
	before := vmHWM(t)
	res, err := e.Execute(context.Background(), task, worker.Slot{})
	require.NoError(t, err)
	growth := vmHWM(t) - before
	t.Logf("peak RSS grew by %d KiB during a 1.25 GiB flood", growth)
	require.Nil(t, res.Error, "%+v", res.Error)
	require.Equal(t, 1.0, res.Metrics["done"], "a METRIC line after the flood is still read")
	bound := 64 << 10
	if raceEnabled {
		bound = 256 << 10
	}
	require.Less(t, growth, bound, "peak RSS growth (KiB)")
	fi, err := os.Stat(filepath.Join(e.LogDir(task), "run.log"))
	require.NoError(t, err)
	require.LessOrEqual(t, fi.Size(), int64(64<<20+4096), "the log file is capped too")
	log, err := os.ReadFile(filepath.Join(e.LogDir(task), "run.log"))
	require.NoError(t, err)
	require.Contains(t, string(log[len(log)-200:]), "log size limit reached")
}

// TestHostilePathCorpus: every hostile path is rejected with the rule it
// breaks, and nothing outside the workspace changes.
func TestHostilePathCorpus(t *testing.T) {
	e := newExec(t)
	corpus := map[string]string{
		"../escape.txt":           "'..' escapes",
		"../../../../../../tmp/x": "'..' escapes",
		"a/../../x":               "'..' escapes",
		"/etc/passwd":             "absolute",
		"/tmp/hpcq-pwned":         "absolute",
		"a\x00b":                  "control or format character",
		"evil\nname":              "control or format character",
		"bell\a":                  "control or format character",
		"\xc3\x28":                "UTF-8",
		"a//b":                    "not a clean path",
		"./a":                     "not a clean path",
		"a/.":                     "not a clean path",
		`..\..\windows`:           "backslash",
		"":                        "required",
		strings.Repeat("d/", 600): "longer than",
		"\u202egnp.exe":           "control or format character", // right-to-left override (a format character)
	}
	snapshot := func() map[string]int64 {
		m := map[string]int64{}
		_ = filepath.WalkDir(e.cfg.RunsDir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				fi, _ := d.Info()
				m[p] = fi.Size()
			}
			return nil
		})
		return m
	}
	i := 0
	for p, rule := range corpus {
		i++
		task := cTask("hostile" + strconv.Itoa(i))
		task.Artifacts.Coding.Workspace.Files = []schema.File{{Path: "ok.c", Content: "int x;"}, {Path: p, Content: "pwned"}}
		before := snapshot()
		res, err := e.Execute(context.Background(), task, worker.Slot{})
		if p == "" { // the queue rejects an empty path before any worker sees it
			require.ErrorContains(t, task.Validate(), "path: is required")
			continue
		}
		require.NoError(t, err, "%q", p)
		require.NotNil(t, res.Error, "%q accepted", p)
		require.Equal(t, schema.ErrKindInvalidWorkspace, res.Error.Kind, "%q", p)
		require.Contains(t, res.Error.Message, rule, "%q", p)
		entries, _ := os.ReadDir(e.WorkspaceDir(task))
		require.Empty(t, entries, "%q: nothing written in the workspace", p)
		for f, size := range snapshot() {
			if strings.HasPrefix(f, e.LogDir(task)+"/") {
				continue // the task's own artifacts.json and (empty) phase logs
			}
			old, existed := before[f]
			require.True(t, existed, "%q created %s", p, f)
			require.Equal(t, old, size, "%q changed %s", p, f)
		}
		_, err = os.Stat("/tmp/hpcq-pwned")
		require.True(t, os.IsNotExist(err))
	}
}

// TestArtifactsUploaded: with an object store, an attempt's phase logs, its
// expected outputs and the plots it wrote are uploaded and listed in the
// result; a plot that is a link out of the workspace is not.
func TestArtifactsUploaded(t *testing.T) {
	requireGCC(t)
	t.Setenv("HOME", t.TempDir())
	q := testutil.StartNATS(t, "embedded").Queue(t, queue.Options{})
	st, err := q.Artifacts(context.Background())
	require.NoError(t, err)
	e, err := NewExecutor(Config{RunsDir: t.TempDir(), KillGrace: 200 * time.Millisecond, ArtifactStore: st})
	require.NoError(t, err)
	task := cTask("plots")
	task.Artifacts.Run.Commands = append(task.Artifacts.Run.Commands,
		"mkdir -p fig && printf '<svg xmlns=\"http://www.w3.org/2000/svg\"/>' > fig/speedup.svg", "ln -s /etc/passwd leak.png")
	res, err := e.Execute(context.Background(), task, worker.Slot{})
	require.NoError(t, err)
	require.Nil(t, res.Error)
	byName := map[string]schema.Artifact{}
	for _, a := range res.Artifacts {
		byName[rundir.ArtifactDir(a)+"/"+a.Name] = a
	}
	require.Len(t, byName, 4, "%+v", res.Artifacts)
	for _, k := range []string{"logs/compile.log", "logs/run.log", "outputs/out.txt", "outputs/fig/speedup.svg"} {
		require.Contains(t, byName, k)
	}
	require.Equal(t, schema.ArtifactPlot, byName["outputs/fig/speedup.svg"].Kind)
	require.Equal(t, "plots: skipped, not regular files: leak.png (a symbolic link)", res.ArtifactsNote)
	res.V, res.RunID, res.NodeID, res.Attempt, res.Worker = schema.Version, task.RunID, task.NodeID, task.Attempt, "w"
	require.NoError(t, res.Validate())
	runDir := t.TempDir()
	require.NoError(t, artifacts.Fetch(context.Background(), st, runDir, res))
	out, err := os.ReadFile(filepath.Join(runDir, "nodes/plots/outputs/out.txt"))
	require.NoError(t, err)
	require.Equal(t, "sum=4\n", string(out))
	log, err := os.ReadFile(filepath.Join(runDir, "nodes/plots/logs/run.log"))
	require.NoError(t, err)
	require.Contains(t, string(log), "sum=4")
}
