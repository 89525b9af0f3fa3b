package executor

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/image"
	"github.com/hpcq/hpcq/internal/image/imagetest"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/schema"
)

// TestContainerCommand: a command with a Root runs in the image: its
// files, its shell, the image's PATH; the workspace at its own path and
// writable; /tmp writable and private; nothing of the host's file system
// but what is bound in; the image's tree itself never written; in one
// attempt's sandbox as in a command's own.
func TestContainerCommand(t *testing.T) {
	e := sandboxed(t)
	root := testutil.BusyboxRoot(t, "hpcq-container")
	hostOnly := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(hostOnly, "secret"), []byte("host"), 0o644))
	for _, session := range []bool{false, true} {
		ws := t.TempDir()
		require.NoError(t, os.Chmod(ws, 0o777))
		var stderr bytes.Buffer
		c := Command{Dir: ws, Env: append(os.Environ(), "PATH=/host/only/bin"), Sandbox: e.sandbox, Root: root, TmpMB: 16, Stderr: &stderr,
			Line: strings.Join([]string{
				`cat /etc/os-release > osr`,
				`echo "$PATH" > path`,
				`ls ` + hostOnly + ` > host 2>&1 || echo hidden > host`,
				`touch /etc/planted 2> /dev/null && echo wrote > etc || echo refused > etc`,
				`echo t > /tmp/t && cat /tmp/t > tmp`,
				`pwd > pwd`,
				`ls /proc | grep -c '^[0-9]' > nprocs`,
			}, "; ")}
		var out Outcome
		var err error
		if session {
			ss, serr := e.sandbox.openSession(c)
			require.NoError(t, serr)
			out, err = ss.run(context.Background(), c)
			ss.close()
		} else {
			out, err = Run(context.Background(), c)
		}
		require.NoError(t, err, stderr.String())
		require.Equal(t, 0, out.ExitCode, stderr.String())
		read := func(name string) string {
			data, err := os.ReadFile(filepath.Join(ws, name))
			require.NoError(t, err, name)
			return strings.TrimSpace(string(data))
		}
		require.Equal(t, "ID=hpcq-container", read("osr"), "the image's files")
		require.Equal(t, containerPath, read("path"), "the image's PATH, not the host's")
		require.Equal(t, "hidden", read("host"), "the host's file system is not seen")
		require.Equal(t, ws, read("pwd"), "the workspace at its own path")
		require.Equal(t, "t", read("tmp"))
		require.NoFileExists(t, filepath.Join(root, "etc/planted"), "the image's tree is never written")
		require.NoFileExists(t, filepath.Join(root, "tmp/t"))
		require.Equal(t, "wrote", read("etc"), "the container's root writes its /etc (in the overlay)")
	}
}

// TestContainerLayer: what a container's root writes over the image (a
// file in /usr, one removed from /etc, a directory replaced) goes to the
// node's layer on disk, not to the image; sealed into the cache as an OCI
// layer, it is what a later command starts from: the image as the first
// left it, owned by the container's root whoever ran it.
func TestContainerLayer(t *testing.T) {
	e := sandboxed(t)
	root := testutil.BusyboxRoot(t, "hpcq-layer")
	cache, err := image.OpenCache(t.TempDir(), 0, nil)
	require.NoError(t, err)
	run := func(layers []string, upper string, lines ...string) string {
		ws := t.TempDir()
		require.NoError(t, os.Chmod(ws, 0o777))
		var stderr bytes.Buffer
		c := Command{Dir: ws, Env: os.Environ(), Sandbox: e.sandbox, Root: root, Layers: layers, Upper: upper, TmpMB: 16,
			Stderr: &stderr, Line: strings.Join(lines, "; ")}
		out, err := Run(context.Background(), c)
		require.NoError(t, err, stderr.String())
		require.Equal(t, 0, out.ExitCode, stderr.String())
		return ws
	}
	newUpper := func() string {
		d := t.TempDir()
		t.Cleanup(func() { _ = removeTree(d) }) // the overlay's work directory is closed
		require.NoError(t, os.Mkdir(filepath.Join(d, "upper"), 0o755))
		require.NoError(t, os.Mkdir(filepath.Join(d, "work"), 0o755))
		return d
	}
	seal := func(upper, ws string) string {
		uid, gid := e.sandbox.containerIDs(nil)
		info, err := cache.SealLayer(context.Background(), filepath.Join(upper, "upper"),
			image.SealOptions{Skip: []string{"/proc", "/dev", "/sys", "/tmp", "/var/tmp", "/etc/resolv.conf", "/etc/hosts", ws}, UID: uid, GID: gid})
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(info.Digest, "sha256:"))
		l, err := cache.Layer(context.Background(), info.Digest)
		require.NoError(t, err)
		t.Cleanup(l.Release)
		return l.Root
	}
	first := newUpper()
	ws := run(nil, first,
		`id -u > uid`, `mkdir -p /usr/local/lib/hpcq && echo v1 > /usr/local/lib/hpcq/lib.txt`,
		`rm /etc/os-release`, `rm -rf /home && mkdir /home && echo new > /home/only`, `stat -c %u /usr/local/lib/hpcq/lib.txt > owner`)
	require.Equal(t, "0\n", readFile(t, filepath.Join(ws, "uid")), "commands run as the container's root")
	require.Equal(t, "0\n", readFile(t, filepath.Join(ws, "owner")))
	require.Equal(t, "v1\n", readFile(t, filepath.Join(first, "upper/usr/local/lib/hpcq/lib.txt")), "the write is in the layer")
	require.NoFileExists(t, filepath.Join(root, "usr/local/lib/hpcq/lib.txt"), "the image is never written")
	require.FileExists(t, filepath.Join(root, "etc/os-release"))
	layer1 := seal(first, ws)
	require.NoDirExists(t, filepath.Join(layer1, "proc"), "the sandbox's mount points are not the layer's")

	second := newUpper()
	ws = run([]string{layer1}, second,
		`cat /usr/local/lib/hpcq/lib.txt > lib`, `test -e /etc/os-release && echo there > osr || echo gone > osr`,
		`ls /home > home`, `echo v2 > /usr/local/lib/hpcq/lib.txt`, `stat -c %u /usr/local/lib/hpcq/lib.txt > owner`)
	require.Equal(t, "v1\n", readFile(t, filepath.Join(ws, "lib")), "the parent's layer is seen")
	require.Equal(t, "gone\n", readFile(t, filepath.Join(ws, "osr")), "what the parent removed stays removed")
	require.Equal(t, "only\n", readFile(t, filepath.Join(ws, "home")), "a directory the parent replaced is its own")
	require.Equal(t, "0\n", readFile(t, filepath.Join(ws, "owner")))
	require.Equal(t, "v1\n", readFile(t, filepath.Join(layer1, "usr/local/lib/hpcq/lib.txt")), "the parent's layer is never written")
	require.Equal(t, "v2\n", readFile(t, filepath.Join(second, "upper/usr/local/lib/hpcq/lib.txt")))
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	require.NoError(t, err)
	return string(data)
}

// TestTaskInEveryImage: a task naming an image runs its phases in it,
// whatever kind the image is; the result says which image, of what
// digest, by which runtime; the metric comes home as from the host.
func TestTaskInEveryImage(t *testing.T) {
	e := sandboxed(t)
	images := imagetest.Images(t, testutil.BusyboxRoot(t, "hpcq-image"))
	for kind, ref := range images {
		task := shellTask("in-"+kind, `cat /etc/os-release > osr`, `echo "METRIC files=$(ls / | wc -l)"`)
		task.Artifacts.Run.MetricPatterns = []schema.MetricPattern{{Name: "files", Regex: `METRIC files=(\d+)`}}
		task.Container = &schema.Container{Image: ref}
		res, err := e.Execute(context.Background(), task, worker.Slot{})
		require.NoError(t, err, kind)
		require.Nil(t, res.Error, "%s: %+v", kind, res.Error)
		require.Equal(t, "ID=hpcq-image", wsFile(t, e, task, "osr"), kind)
		require.NotNil(t, res.Container, kind)
		require.Equal(t, ref, res.Container.Image)
		require.Equal(t, "hpcq", res.Container.Runtime)
		if kind == "dir" {
			require.Empty(t, res.Container.Digest)
		} else {
			require.True(t, strings.HasPrefix(res.Container.Digest, "sha256:"), kind)
		}
		require.Positive(t, res.Metrics["files"], kind)
	}
}

// TestImageRefused: an image that is not there, or not the digest the
// task names, fails the task as the image's fault (ErrKindImage), and a
// worker without namespaces says a container needs them.
func TestImageRefused(t *testing.T) {
	e := sandboxed(t)
	sqfs := imagetest.SquashFS(t, testutil.BusyboxRoot(t, "x"))
	for what, c := range map[string]*schema.Container{
		"missing":      {Image: "/nonexistent/image.sif"},
		"other digest": {Image: sqfs, Digest: "sha256:" + strings.Repeat("0", 64)},
	} {
		task := shellTask("refused", `true`)
		task.Container = c
		res, err := e.Execute(context.Background(), task, worker.Slot{})
		require.NoError(t, err, what)
		require.NotNil(t, res.Error, what)
		require.Equal(t, schema.ErrKindImage, res.Error.Kind, what)
	}
	t.Setenv("HOME", t.TempDir())
	plain, err := NewExecutor(Config{RunsDir: t.TempDir(), Sandbox: SandboxConfig{Mode: IsolationOff}})
	require.NoError(t, err)
	task := shellTask("no-namespaces", `true`)
	task.Container = &schema.Container{Image: sqfs}
	res, err := plain.Execute(context.Background(), task, worker.Slot{})
	require.NoError(t, err)
	require.Equal(t, schema.ErrKindImage, res.Error.Kind)
	require.Contains(t, res.Error.Message, "a container needs them")
}

// TestContainerAsNonRoot: a worker that is not root (its sandbox in a user
// namespace) runs commands in an image too, as the container's root, and
// keeps their layer. The test runs the container
// test again as nobody, from a copy of this test binary.
func TestContainerAsNonRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: switching to nobody to run the container test needs root (CI runs the tests as root)")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv not found: install util-linux")
	}
	testutil.RequireBinary(t, "busybox", "scripts/services.sh install busybox")
	dir, err := os.MkdirTemp("", "hpcq-nonroot-")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	require.NoError(t, os.Chmod(dir, 0o755))
	self, err := os.Executable()
	require.NoError(t, err)
	data, err := os.ReadFile(self)
	require.NoError(t, err)
	bin := filepath.Join(dir, "executor.test")
	require.NoError(t, os.WriteFile(bin, data, 0o755))
	require.NoError(t, os.Chmod(dir, 0o1777)) // its temporary directories are made here
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "env", "HOME="+dir, "TMPDIR="+dir,
		"PATH=/usr/bin:/bin:/usr/sbin:/sbin", bin, "-test.run", "^TestContainer(Command|Layer)$", "-test.v")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), "--- PASS: TestContainerCommand", string(out))
	require.Contains(t, string(out), "--- PASS: TestContainerLayer", string(out))
}

// TestImageToolchains: a task in an image is checked against the image's
// toolchains, probed once per image in a container of it, not against the
// host's: what the image lacks fails the task as the image's fault, saying
// what it has; the result's toolchains are the image's.
func TestImageToolchains(t *testing.T) {
	e := sandboxed(t)
	root := testutil.BusyboxRoot(t, "hpcq-tools")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "usr/bin/gcc"), []byte("#!/bin/sh\necho 'gcc (Fake) 9.8.7'\nexit 0\n"), 0o755))
	sqfs := imagetest.SquashFS(t, root)

	ok := shellTask("has-gcc", `true`)
	ok.Requires = []string{"gcc"}
	ok.Container = &schema.Container{Image: sqfs}
	res, err := e.Execute(context.Background(), ok, worker.Slot{})
	require.NoError(t, err)
	require.Nil(t, res.Error, "%+v", res.Error)
	require.Equal(t, map[string]string{"gcc": "9.8.7"}, res.Toolchain, "the image's toolchains, not the host's")

	missing := shellTask("needs-openmp", `true`)
	missing.Requires = []string{"gcc", "openmp", "mpi"}
	missing.Container = &schema.Container{Image: sqfs}
	res, err = e.Execute(context.Background(), missing, worker.Slot{})
	require.NoError(t, err)
	require.NotNil(t, res.Error)
	require.Equal(t, schema.ErrKindImage, res.Error.Kind)
	require.Contains(t, res.Error.Message, "has no openmp, mpi, which the task requires (it has: gcc 9.8.7)")
	require.Len(t, e.imageTools, 1, "probed once for the image")
}

// TestSiteRuntime: container.runtime charliecloud runs the commands with
// the site's ch-run in the image (the workspace bound at its path), says
// so in the result, and keeps no layer; a runtime the worker lacks fails
// the task as the image's problem.
func TestSiteRuntime(t *testing.T) {
	e := sandboxed(t)
	root := testutil.BusyboxRoot(t, "hpcq-site")
	sqfs := imagetest.SquashFS(t, root)
	for _, rt := range []string{schema.RuntimeApptainer, schema.RuntimeSingularity, schema.RuntimePodman, schema.RuntimeCharliecloud} {
		if _, err := exec.LookPath(runtimePrograms[rt]); err == nil {
			continue
		}
		task := shellTask("no-"+rt, `true`)
		task.Container = &schema.Container{Image: sqfs, Runtime: rt}
		res, err := e.Execute(context.Background(), task, worker.Slot{})
		require.NoError(t, err)
		require.NotNil(t, res.Error, rt)
		require.Equal(t, schema.ErrKindImage, res.Error.Kind)
		require.Contains(t, res.Error.Message, "is not on this worker's PATH")
	}
	testutil.RequireBinary(t, "ch-run", "scripts/services.sh install charliecloud")
	task := shellTask("ch", `cat /etc/os-release > osr`, `echo "$HOME" > home`, `touch /etc/planted 2> /dev/null && echo wrote > etc || echo read-only > etc`)
	task.Container = &schema.Container{Image: sqfs, Runtime: schema.RuntimeCharliecloud, Layers: []string{"sha256:" + strings.Repeat("0", 64)}}
	res, err := e.Execute(context.Background(), task, worker.Slot{})
	require.NoError(t, err)
	if res.Error != nil {
		log, _ := os.ReadFile(filepath.Join(e.LogDir(task), "run.log"))
		t.Fatalf("%+v\n%s", res.Error, log)
	}
	require.Equal(t, "ID=hpcq-site", wsFile(t, e, task, "osr"))
	require.Equal(t, "/mnt", wsFile(t, e, task, "home"), "ch-run binds the workspace onto the image's /mnt: HOME there")
	require.Equal(t, "read-only", wsFile(t, e, task, "etc"), "charliecloud mounts the image read-only")
	require.True(t, strings.HasPrefix(res.Container.Runtime, "charliecloud "), res.Container.Runtime)
	require.Empty(t, res.Container.Layer)
	require.Contains(t, res.Container.LayerNote, "keeps no layer")
	require.Contains(t, res.Container.LayerNote, "the 1 layers its ancestors left are not applied")
}

// TestSiteRuntimeLines: what each site runtime is called with.
func TestSiteRuntimeLines(t *testing.T) {
	line := `echo "it's" > out`
	for rt, want := range map[string]string{
		schema.RuntimeApptainer:    `'/usr/bin/apptainer' exec --contain --no-home --writable-tmpfs --bind '/ws:/ws' --pwd '/ws' --nv '/img.sif' /bin/sh -c 'echo "it'\''s" > out'`,
		schema.RuntimeCharliecloud: `USER=${USER:-hpcq} '/usr/bin/ch-run' --bind='/ws:/mnt' --cd=/mnt '/img.sif' -- /bin/sh -c 'HOME=/mnt; export HOME; echo "it'\''s" > out'`,
		schema.RuntimePodman:       `'/usr/bin/podman' run --rm --network=host --volume '/ws:/ws' --workdir '/ws' --device nvidia.com/gpu=all --rootfs '/img.sif:O' /bin/sh -c 'echo "it'\''s" > out'`,
	} {
		r := &siteRuntime{name: rt, program: "/usr/bin/" + runtimePrograms[rt]}
		require.Equal(t, want, r.wrap(line, "/img.sif", "/ws", true), rt)
	}
}

// TestContainerGPUDriverBound: a task with GPUs in an image gets the
// host's GPU driver files bound read-only (what Apptainer's --nv binds),
// named by LD_LIBRARY_PATH and PATH, listed in the result, left out of its
// layer. The files here stand in for the driver's (this machine has no
// GPU): what is tested is the binding; the GPU check of
// scripts/gpu-check.sh runs CUDA in an image on a GPU machine.
func TestContainerGPUDriverBound(t *testing.T) {
	e := sandboxed(t)
	host := t.TempDir()
	lib, smi := filepath.Join(host, "libcuda.so.1"), filepath.Join(host, "nvidia-smi")
	require.NoError(t, os.WriteFile(lib, []byte("driver library\n"), 0o644))
	require.NoError(t, os.WriteFile(smi, []byte("#!/bin/sh\necho 'NVIDIA-SMI stand-in'\n"), 0o755))
	e.gpuOnce.Do(func() {})
	e.gpuFiles = []string{lib, smi}
	task := shellTask("gpu", `cat /.hpcq/nvidia/lib/libcuda.so.1 > lib`, `echo "$LD_LIBRARY_PATH" > ldp`, `nvidia-smi > smi`,
		`echo x > /.hpcq/nvidia/lib/libcuda.so.1 2> /dev/null && echo writable > ro || echo read-only > ro`, `echo kept > /etc/mine`)
	task.Container = &schema.Container{Image: imagetest.SquashFS(t, testutil.BusyboxRoot(t, "hpcq-gpu"))}
	res, err := e.Execute(context.Background(), task, worker.Slot{GPUs: []string{"0"}})
	require.NoError(t, err)
	if res.Error != nil {
		log, _ := os.ReadFile(filepath.Join(e.LogDir(task), "run.log"))
		t.Fatalf("%+v\n%s", res.Error, log)
	}
	require.Equal(t, "driver library", wsFile(t, e, task, "lib"))
	require.Equal(t, "/.hpcq/nvidia/lib", wsFile(t, e, task, "ldp"))
	require.Equal(t, "NVIDIA-SMI stand-in", wsFile(t, e, task, "smi"))
	require.Equal(t, "read-only", wsFile(t, e, task, "ro"))
	require.Equal(t, []string{"libcuda.so.1", "nvidia-smi"}, res.Container.GPUDriver)
	require.NotContains(t, res.Container.LayerHolds, ".hpcq")
	l, err := e.images.Layer(context.Background(), res.Container.Layer)
	require.NoError(t, err)
	defer l.Release()
	require.NoDirExists(t, filepath.Join(l.Root, ".hpcq"), "the driver's files are not the layer's")
	require.FileExists(t, filepath.Join(l.Root, "etc/mine"))
}

// TestParseLdconfig: the driver's 64-bit libraries from `ldconfig -p`, in
// the cache's order, each file name once.
func TestParseLdconfig(t *testing.T) {
	out := `1234 libs found in cache ` + "`/etc/ld.so.cache'" + `
	libnvidia-ml.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1
	libnvidia-ml.so (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvidia-ml.so
	libcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1
	libcuda.so.1 (libc6) => /usr/lib/i386-linux-gnu/libcuda.so.1
	libcuda.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so.1
	libcudart.so.12 (libc6,x86-64) => /usr/local/cuda/lib64/libcudart.so.12
	libm.so.6 (libc6,x86-64, OS ABI: Linux 3.2.0) => /lib/x86_64-linux-gnu/libm.so.6
`
	require.Equal(t, []string{"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so",
		"/usr/lib/x86_64-linux-gnu/libcuda.so.1"}, parseLdconfig(out, nvidiaLibs),
		"the driver's, not the CUDA runtime's (the image's) nor 32-bit ones; a name listed twice (merged /usr: /lib and /usr/lib, "+
			"as on an Ubuntu 24.04 H200 machine) once, the loader's first")
}
