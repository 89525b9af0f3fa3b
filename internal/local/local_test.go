package local_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/dispatch"
	"github.com/hpcq/hpcq/internal/local"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/schema"
)

func task(node, pool string) *schema.NodeTask {
	return &schema.NodeTask{V: 1, NodeID: node, Attempt: 1, Pool: pool,
		Artifacts: schema.Artifacts{Run: schema.RunPhase{Commands: []string{"echo " + node}}}}
}

func TestLocalExecWithThePhasesExecutor(t *testing.T) {
	t.Setenv("HOME", t.TempDir()) // bash -l without the machine's login profile
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	runDir := filepath.Join(t.TempDir(), dispatch.NewRunID())
	l, err := local.Start(ctx, local.Params{RunDir: runDir, Workers: 2,
		Worker: worker.Config{Pools: []string{"cpu", "big"}, Slots: 1}, Logger: testutil.Logger(t)})
	require.NoError(t, err)
	outs, err := dispatch.Exec(ctx, l.Queue, dispatch.ExecParams{RunID: l.RunID, Logger: testutil.Logger(t),
		Tasks: []*schema.NodeTask{task("a", "cpu"), task("b", "big"), task("c", "cpu")}})
	require.NoError(t, err)
	for _, o := range outs {
		require.True(t, o.OK(), o.Task.NodeID)
		require.Contains(t, o.Result.Phases[len(o.Result.Phases)-1].LogTail, "echo "+o.Task.NodeID)
		_, err := os.Stat(filepath.Join(runDir, "workspaces", o.Task.NodeID, "1"))
		require.NoError(t, err, "workspace under the run dir")
		_, err = os.Stat(filepath.Join(runDir, "phase_logs", "node_"+o.Task.NodeID, "run.log"))
		require.NoError(t, err, "log under the run dir")
	}
	require.NoError(t, l.Close())
	_, err = os.Stat(filepath.Join(runDir, "nats", "jetstream"))
	require.NoError(t, err, "the JetStream store lives in the run dir")
}

func TestExecGivesUpWhenNobodyServesThePool(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	runDir := filepath.Join(t.TempDir(), dispatch.NewRunID())
	noop := worker.ExecutorFunc(func(context.Context, *schema.NodeTask, worker.Slot) (*schema.NodeResult, error) {
		return &schema.NodeResult{}, nil
	})
	l, err := local.Start(ctx, local.Params{RunDir: runDir, Executor: noop, Logger: testutil.Logger(t)})
	require.NoError(t, err)
	defer l.Close()
	outs, err := dispatch.Exec(ctx, l.Queue, dispatch.ExecParams{RunID: l.RunID, ProgressEvery: 500 * time.Millisecond,
		Logger: testutil.Logger(t), Tasks: []*schema.NodeTask{task("ok", "cpu"), task("lonely", "gpu")}})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.True(t, outs[0].OK())
	require.Nil(t, outs[1].Result)
	require.Nil(t, outs[1].DeadLetter)

	_, err = dispatch.Exec(context.Background(), l.Queue, dispatch.ExecParams{
		Tasks: []*schema.NodeTask{task("x", "cpu"), task("x", "cpu")}})
	require.True(t, errors.Is(err, dispatch.ErrDuplicateTask), "%v", err)
}

func TestLocalReportsAFailedWorker(t *testing.T) {
	ctx := context.Background()
	l, err := local.Start(ctx, local.Params{RunDir: filepath.Join(t.TempDir(), "r1"),
		Worker: worker.Config{Pools: []string{"bad pool"}}, Logger: testutil.Logger(t)})
	if err == nil {
		select {
		case <-l.Failed():
		case <-time.After(10 * time.Second):
			t.Fatal("a worker that cannot start is not reported")
		}
		err = l.Close()
	}
	require.ErrorContains(t, err, "Pools")
}
