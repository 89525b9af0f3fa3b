package worker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/schema"
)

// TestExclusiveTasksRunAlone: on a worker of four slots, an exclusive task
// never runs beside another task (it waits for those running, and none
// starts while it runs), the others run four at a time, and the exclusive
// results say how alone they ran: on the worker, or on the node where
// the worker's allocation holds it alone.
func TestExclusiveTasksRunAlone(t *testing.T) {
	for _, node := range []bool{false, true} {
		srv := testutil.StartNATS(t, "embedded")
		q := srv.Queue(t, queue.Options{})
		var mu sync.Mutex
		running := map[string]bool{}
		var sawBeside []string
		peak := 0
		exec := worker.ExecutorFunc(func(ctx context.Context, task *schema.NodeTask, s worker.Slot) (*schema.NodeResult, error) {
			mu.Lock()
			for id := range running {
				if task.Exclusive || len(id) > 1 && id[0] == 'x' {
					sawBeside = append(sawBeside, task.NodeID+" beside "+id)
				}
			}
			running[task.NodeID] = true
			peak = max(peak, len(running))
			mu.Unlock()
			time.Sleep(20 * time.Millisecond) //nolint:forbidigo // a task takes a moment
			mu.Lock()
			delete(running, task.NodeID)
			mu.Unlock()
			return okResult(), nil
		})
		startWorker(t, q, exec, worker.Config{Slots: 4, Cores: 4, NodeExclusive: node})
		ts := tasks(24)
		for i := 3; i < len(ts); i += 6 {
			ts[i].NodeID, ts[i].Exclusive = "x"+ts[i].NodeID, true
		}
		outs := execAll(t, q, ts)
		want := schema.ExclusiveWorker
		if node {
			want = schema.ExclusiveNode
		}
		for _, o := range outs {
			require.True(t, o.OK(), o.Task.NodeID)
			if o.Task.Exclusive {
				require.Equal(t, want, o.Result.Exclusive, o.Task.NodeID)
			} else {
				require.Empty(t, o.Result.Exclusive, o.Task.NodeID)
			}
		}
		require.Empty(t, sawBeside, "an exclusive task ran beside another")
		require.Greater(t, peak, 1, "the other tasks still share the worker")
	}
}
