package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// errCanceled is the cause of the run's context when `scheduler cancel`
// canceled the run.
var errCanceled = errors.New("the run was canceled")

// cancels are the cancels of this run's nodes seen so far: a node waiting
// for its task's answer stops waiting when its channel closes.
type cancels struct {
	byNode map[string]chan struct{}
	reason map[string]string
}

// watchCancels follows the cancel records of the run: the run's own ends
// the run, a node's ends that node.
func (e *engine) watchCancels(ch <-chan queue.Cancel) {
	for c := range ch {
		if c.Run != e.s.RunID {
			continue
		}
		if c.Node == "" {
			if e.canceled.CompareAndSwap(nil, &c) {
				e.s.Log.Warn("run canceled: no new node starts, its tasks are stopped", "reason", c.Reason)
				e.cancel(errCanceled)
			}
			continue
		}
		e.cancelMu.Lock()
		ch := e.nodeCancelChan(c.Node)
		if _, done := e.cancels.reason[c.Node]; !done {
			e.cancels.reason[c.Node] = c.Reason
			close(ch)
			e.s.Log.Info("node canceled", "node_id", c.Node, "reason", c.Reason)
		}
		e.cancelMu.Unlock()
	}
}

// nodeCancelChan is the channel closed when node is canceled; cancelMu
// held.
func (e *engine) nodeCancelChan(node string) chan struct{} {
	if e.cancels.byNode == nil {
		e.cancels = cancels{byNode: map[string]chan struct{}{}, reason: map[string]string{}}
	}
	ch, ok := e.cancels.byNode[node]
	if !ok {
		ch = make(chan struct{})
		e.cancels.byNode[node] = ch
	}
	return ch
}

// nodeCanceled returns a channel closed once node is canceled, and a
// function giving the reason.
func (e *engine) nodeCanceled(node string) (<-chan struct{}, func() string) {
	e.cancelMu.Lock()
	defer e.cancelMu.Unlock()
	return e.nodeCancelChan(node), func() string {
		e.cancelMu.Lock()
		defer e.cancelMu.Unlock()
		return e.cancels.reason[node]
	}
}

// canceledOutcome is the outcome of a node canceled while it waited.
func canceledOutcome(node, reason string) rundir.Outcome {
	o := rundir.Outcome{Node: node, Buggy: true, NotRun: true, Canceled: true, Reason: "canceled"}
	if reason != "" {
		o.Reason += ": " + reason
	}
	return o
}

// ErrRunCanceled is returned when a canceled run is asked to resume.
var ErrRunCanceled = errors.New("the run was canceled")

// checkNotCanceled refuses to resume a run that was canceled: by its own
// record (journal/end.json), or by a cancel recorded on the server while
// no scheduler ran it.
func checkNotCanceled(ctx context.Context, dir string, q *queue.Queue) error {
	end, _, err := rundir.Dir(dir).ReadEnd()
	if err != nil {
		return err
	}
	if end.Canceled != "" {
		return fmt.Errorf("%w (%s): it cannot be resumed; start a new run", ErrRunCanceled, end.Canceled)
	}
	if q == nil {
		return nil
	}
	c, err := q.RunCanceled(ctx, filepath.Base(dir))
	if err != nil {
		return err
	}
	if c != nil {
		return fmt.Errorf("%w (%s, at %s): it cannot be resumed; start a new run", ErrRunCanceled, c.Reason, c.At.Format("2006-01-02 15:04:05 MST"))
	}
	return nil
}

// endInFlight records the nodes a canceled run left unfinished as
// canceled: those published (the workers stop them) and those not yet.
func (e *engine) endInFlight(ctx context.Context, reason string) {
	r := &runner{e: e}
	for _, n := range e.tree.Nodes() {
		if n.Done {
			continue
		}
		dir := filepath.Join(e.s.Dir, nodesDir, n.ID)
		if _, ok, _ := rundir.Dir(e.s.Dir).ReadOutcome(n.ID); ok {
			continue
		}
		var task schema.NodeTask
		tp := &task
		if ok, err := rundir.ReadJSON(filepath.Join(dir, taskFile), &task); err != nil || !ok {
			tp = nil
		}
		if _, err := r.end(ctx, &n, tp, canceledOutcome(n.ID, reason)); err != nil {
			e.s.Log.Warn("canceled node not recorded", "node_id", n.ID, "err", err)
		}
	}
}
