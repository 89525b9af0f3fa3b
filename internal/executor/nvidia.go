package executor

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/hpcq/hpcq/internal/nsinit"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/schema"
)

// The host's NVIDIA driver files a container needs to use its GPUs, as
// Apptainer's --nv binds them (its nvliblist.conf): the driver's user-space
// libraries (they must match the kernel module, so an image cannot carry
// them) and its tools. They are bound read-only under gpuDir in the
// container; LD_LIBRARY_PATH and PATH name them.
var (
	nvidiaLibs = []string{"libcuda.so", "libcudadebugger.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so", "libnvidia-nvvm.so",
		"libnvidia-gpucomp.so", "libnvidia-fatbinaryloader.so", "libnvidia-compiler.so", "libnvidia-opencl.so", "libnvidia-allocator.so",
		"libnvidia-cfg.so", "libnvidia-opticalflow.so", "libnvidia-encode.so", "libnvcuvid.so", "libnvidia-pkcs11.so"}
	nvidiaBins = []string{"nvidia-smi", "nvidia-debugdump", "nvidia-persistenced", "nvidia-cuda-mps-control", "nvidia-cuda-mps-server"}
)

// gpuDir is where a container sees the host's GPU driver files.
const gpuDir = "/.hpcq/nvidia"

// parseLdconfig reads `ldconfig -p`: the 64-bit libraries whose names
// start with one of names, as their paths, one per file name: the cache
// lists a library in the loader's order of preference and may list it
// twice (/lib and /usr/lib of a merged /usr, a CUDA compat directory);
// the loader takes the first, and so does the container.
func parseLdconfig(out string, names []string) []string {
	var paths []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		lib, rest, ok := strings.Cut(line, " (")
		if !ok || !strings.Contains(rest, "x86-64") && !strings.Contains(rest, "AArch64") && !strings.Contains(rest, "64bit") {
			continue
		}
		_, p, ok := strings.Cut(rest, "=> ")
		p = strings.TrimSpace(p)
		if !ok || seen[path.Base(p)] {
			continue
		}
		for _, n := range names {
			if strings.HasPrefix(lib, n) {
				paths = append(paths, p)
				seen[path.Base(p)] = true
				break
			}
		}
	}
	return paths
}

// gpuBinds are the host's driver files to bind in a container whose task
// has GPUs, found once per worker (none on a machine without the driver).
func (e *Executor) gpuBinds(ctx context.Context) []nsinit.Bind {
	e.gpuOnce.Do(func() {
		if e.gpuFiles != nil {
			return // set by a test
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		ldconfig, err := exec.LookPath("ldconfig")
		if err != nil {
			ldconfig = "/sbin/ldconfig"
		}
		out, err := exec.CommandContext(ctx, ldconfig, "-p").Output()
		if err != nil {
			e.cfg.Images.Log.Warn("no GPU driver libraries for containers: ldconfig -p failed", "err", err)
		}
		files := parseLdconfig(string(out), nvidiaLibs)
		for _, b := range nvidiaBins {
			if p, err := exec.LookPath(b); err == nil {
				files = append(files, p)
			}
		}
		e.gpuFiles = files
	})
	binds := make([]nsinit.Bind, 0, len(e.gpuFiles))
	for _, f := range e.gpuFiles {
		if _, err := os.Stat(f); err != nil {
			continue
		}
		sub := "lib"
		if !strings.Contains(path.Base(f), ".so") {
			sub = "bin"
		}
		binds = append(binds, nsinit.Bind{Src: f, Dst: path.Join(gpuDir, sub, path.Base(f))})
	}
	return binds
}

// MPS, NVIDIA's Multi-Process Service, lets the tasks that share a GPU
// (limits.gpus below 1) run their kernels at once, each held to its share
// of the streaming multiprocessors (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE);
// without it they take turns on the device (time-slicing) and a share is
// counted, not enforced. The site starts the control daemon
// (nvidia-cuda-mps-control -d); a worker uses it when it finds its pipe
// directory.
const (
	MPSAuto = "auto" // CUDA_MPS_PIPE_DIRECTORY, else /tmp/nvidia-mps, when the daemon's control pipe is there
	MPSOff  = "off"
)

// defaultMPSPipe is where nvidia-cuda-mps-control puts its pipes unless
// CUDA_MPS_PIPE_DIRECTORY says otherwise.
const defaultMPSPipe = "/tmp/nvidia-mps"

// mpsPipe is the MPS pipe directory the worker's GPU tasks use, or "":
// setting is MPSAuto, MPSOff or a directory; getenv reads the worker's
// environment.
func mpsPipe(setting string, getenv func(string) string) (string, error) {
	switch setting {
	case MPSOff:
		return "", nil
	case "", MPSAuto:
		dir := getenv("CUDA_MPS_PIPE_DIRECTORY")
		if dir == "" {
			dir = defaultMPSPipe
		}
		if fi, err := os.Stat(path.Join(dir, "control")); err == nil && fi.Mode()&os.ModeNamedPipe != 0 {
			return dir, nil
		}
		return "", nil
	}
	if !path.IsAbs(setting) {
		return "", fmt.Errorf("phases: HPCQ_GPU_MPS %q: auto, off or the absolute path of the MPS pipe directory", setting)
	}
	if fi, err := os.Stat(path.Join(setting, "control")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return "", fmt.Errorf("phases: HPCQ_GPU_MPS %q: no MPS control pipe there (is nvidia-cuda-mps-control -d running with CUDA_MPS_PIPE_DIRECTORY set to it?)", setting)
	}
	return path.Clean(setting), nil
}

// MPSPipe is the MPS pipe directory a worker with this HPCQ_GPU_MPS
// setting gives the tasks that share a GPU, or "".
func MPSPipe(setting string) (string, error) { return mpsPipe(setting, os.Getenv) }

// gpuEnv is what a task's commands are told of their GPUs: which
// (CUDA_VISIBLE_DEVICES), and under MPS its pipe directory and, for a share
// of a GPU, the share of its multiprocessors the task may use.
func (e *Executor) gpuEnv(slot worker.Slot) []string {
	if len(slot.GPUs) == 0 {
		return nil
	}
	env := []string{"CUDA_VISIBLE_DEVICES=" + strings.Join(slot.GPUs, ",")}
	if e.mps != "" {
		env = append(env, "CUDA_MPS_PIPE_DIRECTORY="+e.mps)
		if slot.GPUShare > 0 && slot.GPUShare < 1 {
			env = append(env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE="+strconv.Itoa(max(1, int(math.Ceil(slot.GPUShare*100)))))
		}
	}
	return env
}

// gpuEnforced says in the result how the task's GPUs were given.
func (e *Executor) gpuEnforced(slot worker.Slot, enf *schema.Enforced) {
	enf.GPUs = slot.GPUs
	if len(slot.GPUs) == 0 || slot.GPUShare >= 1 || slot.GPUShare <= 0 {
		return
	}
	enf.GPUShare = slot.GPUShare
	if e.mps != "" {
		enf.GPUSharing = "mps"
	} else {
		enf.GPUSharing = "time-slicing"
	}
}
