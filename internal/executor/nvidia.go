package executor

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/hpcq/hpcq/internal/nsinit"
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
// start with one of names, as their paths (one per name found, every
// version of it the cache lists).
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
		if !ok || seen[p] {
			continue
		}
		for _, n := range names {
			if strings.HasPrefix(lib, n) {
				paths = append(paths, strings.TrimSpace(p))
				seen[p] = true
				break
			}
		}
	}
	sort.Strings(paths)
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
