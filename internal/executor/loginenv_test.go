package executor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/schema"
)

// profileHome is a HOME whose login profile prints noise, exports a
// variable and a shell function (as Lmod's module is), and counts how
// often it is read in reads.
func profileHome(t *testing.T) (home, reads string) {
	t.Helper()
	home = t.TempDir()
	reads = filepath.Join(t.TempDir(), "reads")
	require.NoError(t, os.WriteFile(reads, nil, 0o666))
	require.NoError(t, os.Chmod(reads, 0o666)) // the sandbox user appends to it too
	profile := "echo 'Welcome to the cluster'\n" +
		"echo read >> " + reads + "\n" +
		"export SITE_NAME=lab\n" +
		"module() { echo \"module $*\"; }\nexport -f module\n"
	require.NoError(t, os.WriteFile(filepath.Join(home, ".bash_profile"), []byte(profile), 0o644))
	return home, reads
}

func TestCaptureLoginEnv(t *testing.T) {
	home, reads := profileHome(t)
	env := append(os.Environ(), "HOME="+home)
	got, err := CaptureLoginEnv(context.Background(), env, 10*time.Second)
	require.NoError(t, err)
	joined := "\n" + strings.Join(got, "\n") + "\n"
	require.Contains(t, joined, "\nSITE_NAME=lab\n", "what the profile exports")
	require.Contains(t, joined, "\nBASH_FUNC_module%%=", "the exported function")
	require.NotContains(t, joined, "Welcome", "what the profile prints is not the environment")
	require.NotContains(t, joined, "\nSHLVL=")

	var out strings.Builder
	o, err := Run(context.Background(), Command{Line: `module load gcc; echo "site=$SITE_NAME"`, Env: got, Stdout: &out})
	require.NoError(t, err)
	require.Zero(t, o.ExitCode)
	require.Equal(t, "module load gcc\nsite=lab\n", out.String(), "a plain bash -c sees what a login shell sets")
	data, err := os.ReadFile(reads)
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(data), "read"), "the profile ran once, for the capture")

	// A profile that waits forever is a clear error, not a hung worker.
	require.NoError(t, os.WriteFile(filepath.Join(home, ".bash_profile"), []byte("sleep 60\n"), 0o644))
	start := time.Now()
	_, err = CaptureLoginEnv(context.Background(), env, 500*time.Millisecond)
	require.ErrorIs(t, err, ErrLoginEnv)
	require.ErrorContains(t, err, "did not finish within 500ms")
	require.Less(t, time.Since(start), 20*time.Second)
	require.NoError(t, os.WriteFile(filepath.Join(home, ".bash_profile"), []byte("exit 3\n"), 0o644))
	_, err = CaptureLoginEnv(context.Background(), env, 5*time.Second)
	require.ErrorContains(t, err, "exited with status 3")

	_, err = WorkerEnv(context.Background(), "sometimes")
	require.ErrorContains(t, err, `HPCQ_TASK_SHELL="sometimes": must be plain or login`)
}

// TestExecutorReadsTheProfileOnce: in plain mode a task's commands run in
// the environment captured at start (the profile is read once, however
// many commands run); a task with shell login reads it per command.
func TestExecutorReadsTheProfileOnce(t *testing.T) {
	home, reads := profileHome(t)
	t.Setenv("HOME", home)
	count := func() int {
		data, err := os.ReadFile(reads)
		require.NoError(t, err)
		return strings.Count(string(data), "read")
	}
	e, err := NewExecutor(Config{RunsDir: t.TempDir(), KillGrace: 200 * time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, 1, count(), "captured at start")
	task := &schema.NodeTask{V: 1, RunID: "r1", NodeID: "plain", Attempt: 1, Pool: "cpu", Artifacts: schema.Artifacts{
		Run: schema.RunPhase{Commands: []string{`module avail`, `echo "site=$SITE_NAME"`, `true`}}}}
	res, err := e.Execute(context.Background(), task, worker.Slot{})
	require.NoError(t, err)
	require.Nil(t, res.Error, "%+v", res.Error)
	log := res.Phases[len(res.Phases)-1].LogTail
	require.Contains(t, log, "module avail")
	require.Contains(t, log, "site=lab")
	require.Equal(t, 1, count(), "three commands, no profile read")

	task.NodeID, task.Shell = "login", ShellLogin
	res, err = e.Execute(context.Background(), task, worker.Slot{})
	require.NoError(t, err)
	require.Nil(t, res.Error, "%+v", res.Error)
	if e.sandbox == nil || os.Geteuid() != 0 {
		require.Equal(t, 4, count(), "shell login: one profile read per command")
	}
}
