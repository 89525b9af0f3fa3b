package dispatch

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/schema"
)

// Dispatcher publishes a run's tasks one at a time and hands each its
// outcome (result or dead letter) as it arrives: what an asynchronous tree
// search needs, where the next node is chosen when one finishes. It reads
// the run's results from the beginning of the stream, so an outcome that
// arrived before its waiter (a resumed run) is kept and handed over on
// Submit, and a republished task with the same (node, attempt) is answered
// by its earlier result rather than run twice.
type Dispatcher struct {
	q   *queue.Queue
	run string
	w   *queue.Watch

	mu      sync.Mutex
	arrived map[queue.ResultKey]Outcome
	waiting map[queue.ResultKey]waiter
	done    chan struct{}
}

// NewDispatcher starts watching run.
func NewDispatcher(ctx context.Context, q *queue.Queue, run string) (*Dispatcher, error) {
	w, err := q.WatchRun(ctx, run, time.Now().Add(-24*time.Hour))
	if err != nil {
		return nil, err
	}
	d := &Dispatcher{q: q, run: run, w: w, arrived: map[queue.ResultKey]Outcome{}, waiting: map[queue.ResultKey]waiter{},
		done: make(chan struct{})}
	go d.route()
	return d, nil
}

func (d *Dispatcher) route() {
	for {
		var k queue.ResultKey
		var o Outcome
		select {
		case r, ok := <-d.w.Results:
			if !ok {
				return
			}
			k, o = queue.ResultKey{NodeID: r.NodeID, Attempt: r.Attempt}, Outcome{Result: r}
		case dl, ok := <-d.w.DeadLetters:
			if !ok {
				return
			}
			k, o = queue.ResultKey{NodeID: dl.NodeID, Attempt: dl.Attempt}, Outcome{DeadLetter: &dl}
		case <-d.done:
			return
		}
		d.mu.Lock()
		if _, seen := d.arrived[k]; seen {
			d.mu.Unlock()
			continue // a result after a dead letter, or the reverse: the first counts
		}
		d.arrived[k] = o
		wt, ok := d.waiting[k]
		delete(d.waiting, k)
		d.mu.Unlock()
		if ok {
			o.Task = wt.task
			wt.ch <- o // buffered: never blocks
		}
	}
}

type waiter struct {
	ch   chan Outcome
	task *schema.NodeTask
}

// Submit publishes t (its run id set to the dispatcher's) and returns a
// channel that receives its outcome once. A task already answered gets its
// earlier outcome without a publish.
func (d *Dispatcher) Submit(ctx context.Context, t *schema.NodeTask) (<-chan Outcome, error) {
	c := *t
	c.RunID = d.run
	k := queue.ResultKey{NodeID: c.NodeID, Attempt: c.Attempt}
	ch := make(chan Outcome, 1)
	d.mu.Lock()
	if o, ok := d.arrived[k]; ok {
		d.mu.Unlock()
		o.Task = &c
		ch <- o
		return ch, nil
	}
	if _, dup := d.waiting[k]; dup {
		d.mu.Unlock()
		return nil, fmt.Errorf("%w: node %q attempt %d is already waiting", ErrDuplicateTask, c.NodeID, c.Attempt)
	}
	d.waiting[k] = waiter{ch, &c}
	d.mu.Unlock()
	if _, err := d.q.PublishTask(ctx, &c); err != nil {
		d.mu.Lock()
		delete(d.waiting, k)
		d.mu.Unlock()
		return nil, err
	}
	return ch, nil
}

// Close stops watching; waiters get nothing more.
func (d *Dispatcher) Close() {
	close(d.done)
	d.w.Close()
}
