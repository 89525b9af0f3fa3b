package executor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/schema"
)

// sandboxed returns an executor whose commands run in namespaces, or skips
// the test saying why this machine cannot make them.
func sandboxed(t *testing.T) *Executor {
	t.Helper()
	e := newExec(t)
	if e.sandbox == nil {
		t.Skipf("no namespaces on this machine: %s", e.Isolation())
	}
	return e
}

// wsFile is the trimmed content of a file a task left in its workspace.
func wsFile(t *testing.T, e *Executor, task *schema.NodeTask, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(e.WorkspaceDir(task), name))
	require.NoError(t, err, name)
	return strings.TrimSpace(string(data))
}

func shellTask(node string, run ...string) *schema.NodeTask {
	return &schema.NodeTask{V: 1, RunID: "r1", NodeID: node, Attempt: 1, Pool: "cpu",
		Artifacts: schema.Artifacts{Run: schema.RunPhase{Commands: run}}}
}

// TestSandboxWhatACommandSees: its own PID namespace (it is alone with its
// helper), an unprivileged user when the worker is root, a read-only file
// system outside the workspace and a private /tmp, and the isolation is in
// the result.
func TestSandboxWhatACommandSees(t *testing.T) {
	e := sandboxed(t)
	outside := t.TempDir()
	require.NoError(t, os.Chmod(outside, 0o777)) // writable by anyone, were it not hidden
	tmpName := fmt.Sprintf("hpcq-sandbox-%d", time.Now().UnixNano())
	task := shellTask("sees",
		`ls /proc | grep -c '^[0-9]' > nprocs`,
		`id -u > uid`,
		`echo x > `+outside+`/escaped || echo refused > escape`,
		`echo x > /tmp/`+tmpName+` && echo ok > tmp`,
		`echo "$HOME" > home`)
	res, err := e.Execute(context.Background(), task, worker.Slot{})
	require.NoError(t, err)
	require.Nil(t, res.Error, "%+v", res.Error)
	read := func(name string) string { return wsFile(t, e, task, name) }
	n, err := strconv.Atoi(read("nprocs"))
	require.NoError(t, err)
	require.LessOrEqual(t, n, 5, "only the helper, bash and the pipeline are visible")
	require.Equal(t, "refused", read("escape"))
	require.NoFileExists(t, filepath.Join(outside, "escaped"))
	require.Equal(t, "ok", read("tmp"))
	require.NoFileExists(t, filepath.Join(os.TempDir(), tmpName), "/tmp is private")
	iso := res.Isolation
	require.NotNil(t, iso)
	require.Equal(t, "namespaces", iso.Mode)
	require.True(t, iso.PIDNamespace)
	require.True(t, iso.FilesystemHidden)
	require.True(t, iso.Network)
	if os.Geteuid() == 0 {
		require.Equal(t, "65534", read("uid"), "a root worker runs commands as nobody")
		require.Contains(t, iso.User, "nobody")
		require.Equal(t, e.WorkspaceDir(task), read("home"))
	} else {
		require.Equal(t, strconv.Itoa(os.Geteuid()), read("uid"))
	}
}

// TestSandboxNoNetwork: limits.network false takes the network from the
// compile and run phases (loopback only, and up); downloads keep it.
func TestSandboxNoNetwork(t *testing.T) {
	e := sandboxed(t)
	no := false
	task := shellTask("nonet", `tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' > run.ifaces`,
		`cat /sys/class/net/lo/operstate > /dev/null; grep -q ' 00000000 ' /proc/net/route && echo route > route || echo noroute > route`)
	task.Artifacts.Download.Commands = []string{`tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' > download.ifaces`}
	task.Limits.Network = &no
	res, err := e.Execute(context.Background(), task, worker.Slot{})
	require.NoError(t, err)
	require.Nil(t, res.Error, "%+v", res.Error)
	read := func(name string) string { return wsFile(t, e, task, name) }
	require.Equal(t, "lo", read("run.ifaces"))
	require.Equal(t, "noroute", read("route"))
	hostIfaces, err := os.ReadFile("/proc/net/dev")
	require.NoError(t, err)
	if strings.Count(string(hostIfaces), "\n") > 3 { // the worker has more than lo
		require.NotEqual(t, "lo", read("download.ifaces"), "the download phase keeps the network")
	}
	require.False(t, res.Isolation.Network)
}

func TestSandboxConfig(t *testing.T) {
	_, _, err := NewSandbox(context.Background(), SandboxConfig{Mode: "sometimes"}, t.TempDir())
	require.ErrorContains(t, err, `HPCQ_ISOLATION="sometimes": must be auto, required or off`)
	sb, why, err := NewSandbox(context.Background(), SandboxConfig{Mode: IsolationOff}, t.TempDir())
	require.NoError(t, err)
	require.Nil(t, sb)
	require.Contains(t, why, "HPCQ_ISOLATION=off")
	_, _, err = NewSandbox(context.Background(), SandboxConfig{Writable: []string{"rel/dir"}}, t.TempDir())
	require.ErrorContains(t, err, "must be an absolute path")
	if os.Geteuid() == 0 {
		_, _, err = NewSandbox(context.Background(), SandboxConfig{Mode: IsolationRequired, User: "no-such-user-hpcq"}, t.TempDir())
		require.ErrorIs(t, err, ErrIsolation)
		require.ErrorContains(t, err, "no-such-user-hpcq")
		sb, why, err = NewSandbox(context.Background(), SandboxConfig{User: "root"}, t.TempDir())
		require.NoError(t, err, "auto mode goes on without")
		require.Nil(t, sb)
		require.Contains(t, why, `sandbox user "root" is root`)
	}
	// A plain process group says so in every result.
	e, err := NewExecutor(Config{RunsDir: t.TempDir(), Sandbox: SandboxConfig{Mode: IsolationOff}})
	require.NoError(t, err)
	res, err := e.Execute(context.Background(), shellTask("plain", "true"), worker.Slot{})
	require.NoError(t, err)
	require.Equal(t, "none", res.Isolation.Mode)
	require.Contains(t, res.Isolation.Note, "HPCQ_ISOLATION=off")
}

// The hostile tests run the executor in a child process inside an outer PID
// namespace (unshare --pid --fork --mount-proc): if the sandbox failed, a
// `kill -9 -1` would reach only that namespace, never the machine.
const hostileEnv = "HPCQ_TEST_HOSTILE"

// outerNamespace runs this test binary's TestSandboxHostileChild with mode
// inside a new PID namespace and returns the child and its output.
func outerNamespace(t *testing.T, mode string, extraEnv ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the outer PID namespace of this test needs root (unshare --pid)")
	}
	testutil.RequireBinary(t, "unshare", "util-linux")
	if e := newExec(t); e.sandbox == nil {
		t.Skipf("no namespaces on this machine: %s", e.Isolation())
	}
	// sh is the namespace's first process, so that the worker (the test
	// binary) can die without taking the namespace with it.
	cmd := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "--kill-child",
		"/bin/sh", "-c", `"$@"; echo "worker exited: $?"; sleep 60`, "sh", os.Args[0], "-test.run=^TestSandboxHostileChild$", "-test.v")
	cmd.Env = append(append(os.Environ(), hostileEnv+"="+mode, "HPCQ_TEST_RUNS="+t.TempDir()), extraEnv...)
	out := newSyncBuffer()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd, out
}

// syncBuffer is a buffer a child's output is copied into while the test
// reads it: the executor's lockedWriter, readable under its lock.
type syncBuffer struct {
	lockedWriter
	b strings.Builder
}

func newSyncBuffer() *syncBuffer {
	s := &syncBuffer{}
	s.w = &s.b
	return s
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSandboxKillAllStaysInside: a task whose run command kills every
// process it can (kill -9 -1, pkill) leaves the worker and a canary
// process outside its sandbox alive.
func TestSandboxKillAllStaysInside(t *testing.T) {
	cmd, out := outerNamespace(t, "killall")
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	testutil.Eventually(t, 60*time.Second, "the worker to finish", func() bool { return strings.Contains(out.String(), "worker exited") })
	require.Contains(t, out.String(), "hostile: worker and canary alive")
	require.Contains(t, out.String(), "worker exited: 0")
}

// TestSandboxWorkerKilledTakesItsTasks: a worker SIGKILLed while its task
// runs leaves no process of that task behind.
func TestSandboxWorkerKilledTakesItsTasks(t *testing.T) {
	marker := fmt.Sprintf("hpcq-orphan-%d-%d", os.Getpid(), time.Now().UnixNano())
	cmd, out := outerNamespace(t, "longtask", "HPCQ_TEST_MARKER="+marker)
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	testutil.Eventually(t, 30*time.Second, "the task's processes to start", func() bool { return len(testutil.ProcessesWith(marker)) >= 2 })
	// The worker is the test binary under unshare: kill it, not unshare,
	// so its namespace lives on and only the sandbox can clean up.
	worker := 0
	testutil.Eventually(t, 10*time.Second, "the worker process", func() bool {
		worker = childOf(childOf(cmd.Process.Pid))
		return worker > 0
	})
	require.NoError(t, syscall.Kill(worker, syscall.SIGKILL))
	testutil.RequireNoProcessWith(t, marker)
	t.Log(out.String())
}

// childOf is the first child process of pid.
func childOf(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0
	}
	c, _ := strconv.Atoi(f[0])
	return c
}

// TestSandboxHostileChild is the process the hostile tests start inside
// their outer namespace; alone it does nothing.
func TestSandboxHostileChild(t *testing.T) {
	mode := os.Getenv(hostileEnv)
	if mode == "" {
		t.Skip("run by the hostile sandbox tests")
	}
	e, err := NewExecutor(Config{RunsDir: os.Getenv("HPCQ_TEST_RUNS"), KillGrace: 200 * time.Millisecond})
	require.NoError(t, err)
	require.NotNil(t, e.sandbox, e.Isolation())
	switch mode {
	case "killall":
		canary := exec.Command("sleep", "300")
		require.NoError(t, canary.Start())
		defer func() { _ = canary.Process.Kill(); _ = canary.Wait() }()
		task := shellTask("hostile", `kill -9 -1; pkill -9 -f . ; pkill -9 sleep; kill -9 1; echo survived`)
		res, err := e.Execute(context.Background(), task, worker.Slot{})
		require.NoError(t, err)
		require.NotNil(t, res)
		require.NoError(t, canary.Process.Signal(syscall.Signal(0)), "the canary outside the sandbox is alive")
		fmt.Println("hostile: worker and canary alive")
	case "longtask":
		marker := os.Getenv("HPCQ_TEST_MARKER")
		task := shellTask("long", `(exec -a `+marker+` sleep 300) & (setsid bash -c 'exec -a `+marker+` sleep 300') & wait`)
		_, _ = e.Execute(context.Background(), task, worker.Slot{})
		t.Fatal("the worker should have been killed while its task ran")
	}
}
