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
		if os.Geteuid() == 0 {
			require.Equal(t, "refused", read("etc"), "nobody may not write the image's /etc")
		}
	}
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
// namespace) runs commands in an image too. The test runs the container
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
		"PATH=/usr/bin:/bin:/usr/sbin:/sbin", bin, "-test.run", "^TestContainerCommand$", "-test.v")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), "--- PASS: TestContainerCommand", string(out))
}
