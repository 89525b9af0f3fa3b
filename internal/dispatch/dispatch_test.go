package dispatch_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hpcq/hpcq/internal/local"
	"github.com/hpcq/hpcq/internal/tree"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/dispatch"
	"github.com/hpcq/hpcq/internal/search"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/schema"
)

// TestDispatcher: outcomes reach their submitter one by one; a task that
// cannot run is dead-lettered to its waiter; a resumed dispatcher answers
// an already-answered task from the stream without running it again.
func TestDispatcher(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var runs atomic.Int64
	// "a" is answered only after its duplicate was refused: a task already
	// answered would get its earlier outcome instead.
	release := make(chan struct{})
	var releaseOnce sync.Once
	defer releaseOnce.Do(func() { close(release) })
	exec := worker.ExecutorFunc(func(ctx context.Context, tk *schema.NodeTask, _ worker.Slot) (*schema.NodeResult, error) {
		if tk.NodeID == "a" {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		runs.Add(1)
		return &schema.NodeResult{Metrics: map[string]float64{"score": float64(len(tk.NodeID))}}, nil
	})
	runDir := filepath.Join(t.TempDir(), dispatch.NewRunID())
	l, err := local.Start(ctx, local.Params{RunDir: runDir, Executor: exec, Logger: testutil.Logger(t),
		Worker: worker.Config{Slots: 2, Toolchains: map[string]string{"gcc": "12"}}})
	require.NoError(t, err)
	defer l.Close()

	d, err := dispatch.NewDispatcher(ctx, l.Queue, l.RunID)
	require.NoError(t, err)
	a, err := d.Submit(ctx, task("a", "cpu"))
	require.NoError(t, err)
	bb, err := d.Submit(ctx, task("bb", "cpu"))
	require.NoError(t, err)
	needs := task("cuda", "cpu")
	needs.Requires = []string{"nvcc"}
	c, err := d.Submit(ctx, needs)
	require.NoError(t, err)
	_, err = d.Submit(ctx, task("a", "cpu"))
	require.ErrorIs(t, err, dispatch.ErrDuplicateTask)
	releaseOnce.Do(func() { close(release) })
	oa, obb, oc := <-a, <-bb, <-c
	require.Equal(t, 1.0, oa.Result.Metrics["score"])
	require.Equal(t, 2.0, obb.Result.Metrics["score"])
	require.Equal(t, "a", oa.Task.NodeID)
	require.NotNil(t, oc.DeadLetter)
	require.Contains(t, oc.DeadLetter.Reason, "nvcc")
	d.Close()
	require.EqualValues(t, 2, runs.Load())

	// A resumed scheduler: the answers are in the stream.
	d, err = dispatch.NewDispatcher(ctx, l.Queue, l.RunID)
	require.NoError(t, err)
	defer d.Close()
	testutil.Eventually(t, 10*time.Second, "the earlier result", func() bool {
		ch, err := d.Submit(ctx, task("bb", "cpu"))
		require.NoError(t, err)
		o := <-ch
		return o.Result != nil && o.Result.Metrics["score"] == 2
	})
	require.EqualValues(t, 2, runs.Load(), "not run again")
}

// TestSearchOverTheQueue: an asynchronous tree search whose nodes run as
// tasks on a local worker through the real phases executor.
func TestSearchOverTheQueue(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runDir := filepath.Join(t.TempDir(), dispatch.NewRunID())
	l, err := local.Start(ctx, local.Params{RunDir: runDir, Workers: 2, Logger: testutil.Logger(t),
		Worker: worker.Config{Slots: 1}})
	require.NoError(t, err)
	defer l.Close()
	d, err := dispatch.NewDispatcher(ctx, l.Queue, l.RunID)
	require.NoError(t, err)
	defer d.Close()
	r := search.RunnerFunc(func(ctx context.Context, n *tree.Node) (search.Result, error) {
		i, _ := strconv.Atoi(n.ID[1:])
		cmd := fmt.Sprintf("echo METRIC score=%d", (i*7)%10)
		if i == 2 {
			cmd = "exit 3" // a buggy node
		}
		ch, err := d.Submit(ctx, &schema.NodeTask{V: 1, NodeID: n.ID, Attempt: 1, Pool: "cpu", Kind: n.Kind, ParentID: n.Parent,
			Artifacts: schema.Artifacts{Run: schema.RunPhase{Commands: []string{cmd}}}})
		if err != nil {
			return search.Result{}, err
		}
		o := <-ch
		switch {
		case o.Result == nil:
			return search.Result{Buggy: true, Reason: fmt.Sprintf("dead-lettered: %+v", o.DeadLetter)}, nil
		case o.Result.Error != nil:
			return search.Result{Buggy: true, Reason: fmt.Sprintf("%s in %s", o.Result.Error.Kind, o.Result.Error.Phase)}, nil
		}
		return search.Result{Metric: o.Result.Metrics["score"], HasMetric: true}, nil
	})
	tree := search.NewTree()
	st := search.Run(ctx, tree, search.Policy{NumDrafts: 3, DebugProb: 1, MaxDebugDepth: 1, Maximize: true, Rand: rand.New(rand.NewPCG(1, 1))},
		r, 2, 8, search.Async)
	require.Equal(t, 8, st.Nodes)
	nodes := tree.Nodes()
	require.True(t, nodes[1].Buggy)
	require.Contains(t, nodes[1].Reason, "run_failed")
	debugged := false
	for _, n := range nodes {
		debugged = debugged || (n.Kind == search.Debug && n.Parent == "n0002")
	}
	require.True(t, debugged, "the buggy draft is debugged")
	best, ok := tree.Best(true)
	require.True(t, ok)
	require.Equal(t, 9.0, best.Metric)
}

func task(node, pool string) *schema.NodeTask {
	return &schema.NodeTask{V: 1, NodeID: node, Attempt: 1, Pool: pool,
		Artifacts: schema.Artifacts{Run: schema.RunPhase{Commands: []string{"echo " + node}}}}
}
