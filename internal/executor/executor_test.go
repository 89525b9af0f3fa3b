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

func newExec(t *testing.T) *Executor {
	t.Helper()
	t.Setenv("HOME", t.TempDir()) // see testutil.ShellEnv
	t.Setenv("HPCQ_NATS_PASSWORD", "s3cret")
	e, err := NewExecutor(Config{RunsDir: t.TempDir(), KillGrace: 200 * time.Millisecond, Images: ImagesConfig{Dirs: []string{testImages(t)}}})
	require.NoError(t, err)
	return e
}

func cTask(node string) *schema.NodeTask {
	return &schema.NodeTask{V: 1, RunID: "r1", NodeID: node, Attempt: 1, Pool: "cpu",
		Artifacts: schema.Artifacts{
			Coding: schema.CodingPhase{Workspace: schema.Workspace{Files: []schema.File{
				{Path: "src/main.c", Content: "#include <stdio.h>\nint main(void){printf(\"sum=%d\\n\", 2+2); return 0;}\n"},
			}}},
			Compile: schema.CommandsPhase{Commands: []string{"gcc -O2 -o main src/main.c"}},
			Run:     schema.RunPhase{Commands: []string{"./main > out.txt", "cat out.txt"}, ExpectedOutputs: []string{"out.txt"}},
		}}
}

func TestExecuteCompilesAndRuns(t *testing.T) {
	requireGCC(t)
	e := newExec(t)
	task := cTask("n1")
	task.Artifacts.Download.Commands = []string{"echo fetching", "env > env.txt"}
	res, err := e.Execute(context.Background(), task, worker.Slot{Cores: 3})
	require.NoError(t, err)
	require.Nil(t, res.Error, "%+v", res.Error)
	var names []string
	for _, p := range res.Phases {
		names = append(names, p.Name)
		require.True(t, p.OK, p.Name)
	}
	require.Equal(t, []string{"coding", "download", "compile", "run"}, names)
	require.Contains(t, res.Phases[3].LogTail, "sum=4")
	require.Equal(t, []string{"out.txt"}, res.OutputsFound)
	log, err := os.ReadFile(filepath.Join(e.LogDir(task), "run.log"))
	require.NoError(t, err)
	require.Contains(t, string(log), "$ ./main > out.txt\n")
	require.Contains(t, string(log), "sum=4")

	env, err := os.ReadFile(filepath.Join(e.WorkspaceDir(task), "env.txt"))
	require.NoError(t, err)
	require.Contains(t, string(env), "OMP_NUM_THREADS=3\n")
	require.Contains(t, string(env), "HPCQ_NODE_ID=n1\n")
	require.NotContains(t, string(env), "s3cret", "the worker's secrets never reach a task")
}

func TestExecuteFailures(t *testing.T) {
	e := newExec(t)
	ctx := context.Background()

	bad := cTask("compile")
	bad.Artifacts.Compile.Commands = []string{"echo 'main.c:1:1: error: nope' >&2; exit 1"}
	res, err := e.Execute(ctx, bad, worker.Slot{Cores: 1})
	require.NoError(t, err)
	require.Equal(t, schema.ErrKindCompileFailed, res.Error.Kind)
	require.Equal(t, schema.PhaseCompile, res.Error.Phase)
	require.Contains(t, res.Error.Message, "exited with status 1")
	require.Contains(t, res.Phases[len(res.Phases)-1].LogTail, "error: nope")
	require.Equal(t, 1, res.Phases[len(res.Phases)-1].ExitCode)

	inst := cTask("install")
	inst.Artifacts.Download.Commands = []string{"exit 7"}
	res, err = e.Execute(ctx, inst, worker.Slot{})
	require.NoError(t, err)
	require.Equal(t, schema.ErrKindInstallFailed, res.Error.Kind)

	slow := cTask("slow")
	slow.Artifacts.Compile.Commands = nil
	slow.Artifacts.Run.Commands = []string{"sleep 1000"}
	slow.Limits.RunTimeoutS = 1
	res, err = e.Execute(ctx, slow, worker.Slot{})
	require.NoError(t, err)
	require.Equal(t, schema.ErrKindTimeout, res.Error.Kind)
	require.Equal(t, schema.PhaseRun, res.Error.Phase)

	ws := cTask("ws")
	ws.Artifacts.Coding.Workspace.Files = append(ws.Artifacts.Coding.Workspace.Files, schema.File{Path: "/etc/evil", Content: "x"})
	res, err = e.Execute(ctx, ws, worker.Slot{})
	require.NoError(t, err)
	require.Equal(t, schema.ErrKindInvalidWorkspace, res.Error.Kind)
	require.Contains(t, res.Error.Message, `"/etc/evil"`)
	entries, _ := os.ReadDir(e.WorkspaceDir(ws))
	require.Empty(t, entries)

	miss := cTask("missing")
	miss.Artifacts.Compile.Commands = nil
	miss.Artifacts.Run = schema.RunPhase{Commands: []string{"true"}, ExpectedOutputs: []string{"result.csv", "../x"}}
	res, err = e.Execute(ctx, miss, worker.Slot{})
	require.NoError(t, err)
	require.Equal(t, schema.ErrKindMissingOutput, res.Error.Kind)
	require.Contains(t, res.Error.Message, "result.csv, ../x")
}

func TestExecuteFreshWorkspaceAndCancel(t *testing.T) {
	e := newExec(t)
	task := cTask("fresh")
	task.Artifacts.Compile.Commands = nil
	task.Artifacts.Run = schema.RunPhase{Commands: []string{"test ! -e stale.txt && touch stale.txt"}}
	for range 2 { // the same attempt delivered twice sees a clean directory
		res, err := e.Execute(context.Background(), task, worker.Slot{})
		require.NoError(t, err)
		require.Nil(t, res.Error)
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	task.Artifacts.Run = schema.RunPhase{Commands: []string{"sleep 1000"}}
	res, err := e.Execute(ctx, task, worker.Slot{})
	require.ErrorIs(t, err, context.Canceled)
	require.Nil(t, res)
}

func TestCappedWriter(t *testing.T) {
	var b strings.Builder
	w := &cappedWriter{w: &b, left: 5}
	n, err := w.Write([]byte("abcdefgh"))
	require.NoError(t, err)
	require.Equal(t, 8, n)
	_, _ = w.Write([]byte("more"))
	require.Equal(t, "abcde\n[hpcq: log size limit reached, the rest of the output is not logged]\n", b.String())
}

// testImages is the directory of every temporary directory of the test:
// the images the test builds lie there, the site's image directory
// (HPCQ_IMAGE_DIRS) of its executors.
func testImages(t *testing.T) string { return filepath.Dir(t.TempDir()) }
