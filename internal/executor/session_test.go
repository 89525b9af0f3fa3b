package executor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/schema"
)

// TestOneSandboxPerAttempt: every command of a task attempt runs in the
// same namespaces (one mount namespace, one /tmp: what the download phase
// left there the run phase finds), a command without network gets a
// network namespace of its own inside it, and what a command left running
// is gone before the next starts. Another attempt gets a sandbox (and a
// /tmp) of its own.
func TestOneSandboxPerAttempt(t *testing.T) {
	e := sandboxed(t)
	no := false
	task := shellTask("shared",
		`readlink /proc/self/ns/mnt > run.mnt; readlink /proc/self/ns/net > run.net; cat /tmp/from-download > run.tmp`,
		`kill -0 $(cat /tmp/leftover.pid) 2>/dev/null && echo alive > left || echo gone > left; for f in /proc/$$/fd/*; do readlink $f; done | grep -c socket: > run.sockets || true`)
	task.Artifacts.Download.Commands = []string{
		`readlink /proc/self/ns/mnt > download.mnt; readlink /proc/self/ns/net > download.net; echo kept > /tmp/from-download`,
		`sleep 300 & echo $! > /tmp/leftover.pid`,
	}
	task.Artifacts.Compile.Commands = []string{`readlink /proc/self/ns/mnt > compile.mnt; readlink /proc/self/ns/net > compile.net`}
	task.Limits.Network = &no
	res := executeIn(t, e, task, worker.Slot{}, time.Minute)
	require.Nil(t, res.Error, "%+v", res.Error)
	read := func(name string) string { return wsFile(t, e, task, name) }
	mnt := read("download.mnt")
	require.Equal(t, mnt, read("compile.mnt"))
	require.Equal(t, mnt, read("run.mnt"))
	require.Equal(t, "kept", read("run.tmp"), "/tmp lasts for the attempt")
	require.Equal(t, "gone", read("left"), "a command's leftover processes end with it")
	require.Equal(t, "0", read("run.sockets"), "the helper's socket is not the command's")
	require.NotEqual(t, read("download.net"), read("run.net"), "compile and run have no network")
	require.Equal(t, read("compile.net"), read("run.net"), "one network namespace for the commands without")

	again := shellTask("shared", `ls /tmp/from-download /tmp/leftover.pid > tmp.list 2>&1; echo $? > tmp.status`)
	again.Attempt = 2
	res = executeIn(t, e, again, worker.Slot{}, time.Minute)
	require.Nil(t, res.Error)
	require.Equal(t, "2", wsFile(t, e, again, "tmp.status"), "a fresh /tmp: %s", wsFile(t, e, again, "tmp.list"))
}

// TestAttemptSandboxSetupFails: a sandbox that cannot be set up fails the
// attempt's first command with status 125 and the helper's reason in the
// log (a task error, not the worker's), as a sandbox per command did.
func TestAttemptSandboxSetupFails(t *testing.T) {
	e := sandboxed(t)
	if !e.sandbox.hideFS {
		t.Skip("the file system is not hidden here: nothing to fail")
	}
	e.sandbox.writable = []string{"/nonexistent-hpcq-writable"}
	res, err := e.Execute(context.Background(), shellTask("nosetup", "echo never", "echo never either"), worker.Slot{})
	require.NoError(t, err)
	require.NotNil(t, res.Error)
	run := res.Phases[len(res.Phases)-1]
	require.Equal(t, 125, run.ExitCode)
	require.Contains(t, run.LogTail, "hpcq-sandbox: writable /nonexistent-hpcq-writable")
	require.NotContains(t, run.LogTail, "never either", "the phase stops at its first command")
	require.Equal(t, schema.ErrKindRunFailed, res.Error.Kind)
}

// TestAttemptSandboxTimeoutAndCancel: a command past its timeout is
// stopped (SIGTERM, then SIGKILL after the grace) inside the attempt's
// sandbox and the next command still runs there; a canceled context
// stops the command at once.
func TestAttemptSandboxTimeoutAndCancel(t *testing.T) {
	e := sandboxed(t)
	task := shellTask("slow", `trap '' TERM; sleep 30`)
	task.Limits.RunTimeoutS = 1
	start := time.Now()
	res := executeIn(t, e, task, worker.Slot{}, time.Minute)
	require.NotNil(t, res.Error)
	require.Equal(t, schema.ErrKindTimeout, res.Error.Kind)
	require.Less(t, time.Since(start), 10*time.Second, "SIGKILL after the grace")

	box := &attemptSandbox{}
	defer box.close()
	ws := t.TempDir()
	require.NoError(t, e.sandbox.ChownWorkspace(ws, nil))
	var out strings.Builder
	c := Command{Line: "sleep 30", Dir: ws, Env: e.baseEnv, Timeout: time.Second, KillGrace: 200 * time.Millisecond, Sandbox: e.sandbox,
		Stdout: &lockedWriter{w: &out}, Stderr: &lockedWriter{w: &out}}
	o, err := box.run(context.Background(), c)
	require.NoError(t, err)
	require.True(t, o.TimedOut)
	c.Line, c.Timeout = "echo still here", 0
	o, err = box.run(context.Background(), c)
	require.NoError(t, err)
	require.Zero(t, o.ExitCode)
	require.Contains(t, out.String(), "still here")

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	c.Line = "sleep 30"
	start = time.Now()
	o, err = box.run(ctx, c)
	require.NoError(t, err)
	require.True(t, o.Canceled)
	require.Less(t, time.Since(start), 5*time.Second)
}
