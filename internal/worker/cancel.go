// Cancels: a canceled run's or node's tasks stopped where they run, or
// answered without running.

package worker

import (
	"context"
	"time"

	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/schema"
)

// watchCancels records every cancel and stops the running tasks it covers.
func (w *Worker) watchCancels(cancels <-chan queue.Cancel) {
	for c := range cancels {
		w.cancelMu.Lock()
		key := c.Run + "/" + c.Node
		w.canceled[key] = c
		for t, stop := range w.stoppers {
			if c.Matches(t.RunID, t.NodeID) {
				w.log.Info("stopping a canceled task", "run_id", t.RunID, "node_id", t.NodeID, "reason", c.Reason)
				stop(ErrCanceled)
			}
		}
		w.cancelMu.Unlock()
	}
}

// cancelOf returns the cancel covering t, if one was seen.
func (w *Worker) cancelOf(t *schema.NodeTask) (queue.Cancel, bool) {
	w.cancelMu.Lock()
	defer w.cancelMu.Unlock()
	if c, ok := w.canceled[t.RunID+"/"]; ok {
		return c, true
	}
	c, ok := w.canceled[t.RunID+"/"+t.NodeID]
	return c, ok
}

// track registers a running task's stop function; the returned func
// forgets it.
func (w *Worker) track(t *schema.NodeTask, stop context.CancelCauseFunc) func() {
	w.cancelMu.Lock()
	w.stoppers[t] = stop
	w.cancelMu.Unlock()
	return func() {
		w.cancelMu.Lock()
		delete(w.stoppers, t)
		w.cancelMu.Unlock()
	}
}

// canceledResult is the answer of a task canceled before or while it ran.
func canceledResult(c queue.Cancel, started time.Time, ran bool) *schema.NodeResult {
	what := "canceled before it ran"
	if ran {
		what = "canceled while running: its commands were stopped"
	}
	if c.Reason != "" {
		what += " (" + c.Reason + ")"
	}
	return &schema.NodeResult{Started: started.UTC(), DurationMS: time.Since(started).Milliseconds(),
		Error: &schema.ResultError{Phase: "cancel", Kind: schema.ErrKindCanceled, Message: what}}
}
