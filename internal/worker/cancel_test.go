package worker_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/schema"
)

// TestCancelStopsAndAnswers: a canceled node's running command is stopped
// and answered canceled; a task of a canceled run delivered once the worker
// has seen the cancel is answered canceled without running. (Cancels reach
// a worker through a watch: a task delivered before it, just after
// CancelRun returned, is stopped while running, as the first one here.)
func TestCancelStopsAndAnswers(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv *testutil.NATS) {
		ctx := context.Background()
		q := srv.Queue(t, queue.Options{})
		marker := fmt.Sprintf("hpcq-cancel-test-%d", time.Now().UnixNano())
		b := startWorker(t, q, realExec(t), worker.Config{Slots: 1, Cores: 1})
		w, err := q.WatchRun(ctx, "rc", time.Now())
		require.NoError(t, err)
		defer w.Close()
		long := &schema.NodeTask{V: 1, RunID: "rc", NodeID: "long", Attempt: 1, Pool: "cpu",
			Artifacts: schema.Artifacts{Run: schema.RunPhase{Commands: []string{"bash -c 'sleep 60; true' " + marker}}}}
		_, err = q.PublishTask(ctx, long)
		require.NoError(t, err)
		testutil.Eventually(t, 30*time.Second, "the command to run", func() bool { return len(testutil.ProcessesWith(marker)) > 0 })
		require.NoError(t, q.CancelNodes(ctx, "rc", []string{"long"}, "test"))
		select {
		case r := <-w.Results:
			require.Equal(t, "long", r.NodeID)
			require.NotNil(t, r.Error)
			require.Equal(t, schema.ErrKindCanceled, r.Error.Kind)
			require.Contains(t, r.Error.Message, "canceled while running")
		case <-time.After(30 * time.Second):
			t.Fatal("no canceled result")
		}
		testutil.RequireNoProcessWith(t, marker)
		// The answered task's ack may reach the server a moment after its
		// result: until then the task is still in the work queue.
		testutil.Eventually(t, 30*time.Second, "the answered task acked", func() bool {
			stats, err := q.Stats(ctx)
			require.NoError(t, err)
			for _, s := range stats {
				if s.Pool == "cpu" && s.Pending+s.InFlight > 0 {
					return false
				}
			}
			return true
		})

		// The whole run: the next task of it is answered without running.
		n, err := q.CancelRun(ctx, "rc", "enough")
		require.NoError(t, err)
		require.Zero(t, n)
		testutil.Eventually(t, 30*time.Second, "the worker to see the run's cancel", func() bool { return b.w.KnowsCancel("rc", "late") })
		late := &schema.NodeTask{V: 1, RunID: "rc", NodeID: "late", Attempt: 1, Pool: "cpu",
			Artifacts: schema.Artifacts{Run: schema.RunPhase{Commands: []string{"touch " + filepath.Join(t.TempDir(), "ran")}}}}
		_, err = q.PublishTask(ctx, late)
		require.NoError(t, err)
		select {
		case r := <-w.Results:
			require.Equal(t, "late", r.NodeID)
			require.Equal(t, schema.ErrKindCanceled, r.Error.Kind)
			require.Contains(t, r.Error.Message, "canceled before it ran (enough)")
			require.Empty(t, r.Phases, "it did not run")
		case <-time.After(30 * time.Second):
			t.Fatal("no canceled result for the late task")
		}
	})
}

// TestCancelPurgesQueuedTasks: with no worker to take them, a canceled
// run's queued tasks are removed from the work queue; another run's stay.
func TestCancelPurgesQueuedTasks(t *testing.T) {
	ctx := context.Background()
	q := testutil.StartNATS(t, "embedded").Queue(t, queue.Options{})
	for _, run := range []string{"keep", "drop"} {
		ts := tasks(3)
		for _, task := range ts {
			task.RunID = run
		}
		_, err := q.PublishTasks(ctx, ts)
		require.NoError(t, err)
	}
	n, err := q.CancelRun(ctx, "drop", "test")
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	stats, err := q.Stats(ctx)
	require.NoError(t, err)
	require.Len(t, stats, 1)
	require.EqualValues(t, 3, stats[0].Pending, "the other run's tasks stay")
}
