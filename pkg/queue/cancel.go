package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hpcq/hpcq/pkg/schema"
)

// Cancel is a request to stop a run, or one node of it: no new task of it
// starts, queued ones are answered without running, running ones are
// stopped (process group, as on timeout) and end as canceled.
type Cancel struct {
	Run string `json:"run"`
	// Node is empty when the whole run is canceled.
	Node   string    `json:"node,omitempty"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// Matches reports whether the cancel covers the node of run.
func (c Cancel) Matches(run, node string) bool {
	return c.Run == run && (c.Node == "" || c.Node == node)
}

func (c Cancel) key() string {
	if c.Node == "" {
		return c.Run
	}
	return c.Run + "." + c.Node
}

// CancelRun cancels run: it records the cancel (workers and the run's
// scheduler watch for it) and removes the run's queued tasks from the work
// queue. It returns how many queued tasks were removed.
func (q *Queue) CancelRun(ctx context.Context, run, reason string) (uint64, error) {
	if err := schema.CheckToken("run", run, true); err != nil {
		return 0, err
	}
	if err := q.putCancel(ctx, Cancel{Run: run, Reason: reason, At: time.Now().UTC()}); err != nil {
		return 0, err
	}
	return q.purgeRunTasks(ctx, run)
}

// CancelNodes cancels nodes of run. Their queued tasks stay in the work
// queue until a worker takes them and answers them canceled without
// running them; the scheduler stops waiting for them at once.
func (q *Queue) CancelNodes(ctx context.Context, run string, nodes []string, reason string) error {
	if err := schema.CheckToken("run", run, true); err != nil {
		return err
	}
	for _, n := range nodes {
		if err := schema.CheckID("node", n, true); err != nil {
			return err
		}
	}
	for _, n := range nodes {
		if err := q.putCancel(ctx, Cancel{Run: run, Node: n, Reason: reason, At: time.Now().UTC()}); err != nil {
			return err
		}
	}
	return nil
}

func (q *Queue) putCancel(ctx context.Context, c Cancel) error {
	kv, err := q.cancels(ctx)
	if err != nil {
		return err
	}
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, c.key(), data); err != nil {
		return fmt.Errorf("queue: cancel %s: %w", c.key(), err)
	}
	return nil
}

// RunCanceled returns the cancel of the whole run, if there is one.
func (q *Queue) RunCanceled(ctx context.Context, run string) (*Cancel, error) {
	kv, err := q.cancels(ctx)
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, run)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("queue: cancel of %s: %w", run, err)
	}
	var c Cancel
	if err := json.Unmarshal(e.Value(), &c); err != nil {
		return nil, fmt.Errorf("queue: cancel of %s: %w", run, err)
	}
	return &c, nil
}

// WatchCancels delivers every cancel recorded (those already there first),
// then the new ones as they come, until ctx ends.
func (q *Queue) WatchCancels(ctx context.Context) (<-chan Cancel, error) {
	kv, err := q.cancels(ctx)
	if err != nil {
		return nil, err
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("queue: watch cancels: %w", err)
	}
	out := make(chan Cancel, 64)
	go func() {
		defer close(out)
		defer func() { _ = w.Stop() }() // the watch ends with its subscription either way
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil || e.Operation() != jetstream.KeyValuePut {
					continue
				}
				var c Cancel
				if err := json.Unmarshal(e.Value(), &c); err != nil || c.Run == "" {
					q.log.Warn("unreadable cancel skipped", "key", e.Key(), "err", err)
					continue
				}
				select {
				case out <- c:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

// purgeRunTasks removes run's tasks from the work queue, those a worker
// holds included: their acks find nothing, which is harmless, and the
// cancel record stops them.
func (q *Queue) purgeRunTasks(ctx context.Context, run string) (uint64, error) {
	s, err := q.js.Stream(ctx, TasksStream)
	if err != nil {
		return 0, fmt.Errorf("queue: purge tasks of %s: %w", run, err)
	}
	n, err := q.purgeSubject(ctx, s, runTasks(run))
	if err != nil {
		return 0, fmt.Errorf("queue: purge tasks of %s: %w", run, err)
	}
	return n, nil
}

// purgeSubject purges subject from s and returns how many messages went.
func (q *Queue) purgeSubject(ctx context.Context, s jetstream.Stream, subject string) (uint64, error) {
	before, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, c := range before.State.Subjects {
		n += c
	}
	if n == 0 {
		return 0, nil
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
		return 0, err
	}
	return n, nil
}

// PurgeRun deletes what the server keeps of a finished run: its queued
// tasks, its results, and its cancel records. (Artifacts: see
// artifacts.Purge.) It returns the tasks and results removed.
func (q *Queue) PurgeRun(ctx context.Context, run string) (tasks, results uint64, err error) {
	if err := schema.CheckToken("run", run, true); err != nil {
		return 0, 0, err
	}
	if tasks, err = q.purgeRunTasks(ctx, run); err != nil {
		return 0, 0, err
	}
	s, err := q.js.Stream(ctx, ResultsStream)
	if err != nil {
		return tasks, 0, fmt.Errorf("queue: purge results of %s: %w", run, err)
	}
	if results, err = q.purgeSubject(ctx, s, ResultSubject(run)); err != nil {
		return tasks, 0, fmt.Errorf("queue: purge results of %s: %w", run, err)
	}
	kv, err := q.cancels(ctx)
	if err != nil {
		return tasks, results, err
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return tasks, results, fmt.Errorf("queue: cancels of %s: %w", run, err)
	}
	for k := range keys.Keys() {
		if k == run || strings.HasPrefix(k, run+".") {
			if err := kv.Purge(ctx, k); err != nil {
				return tasks, results, fmt.Errorf("queue: cancels of %s: %w", run, err)
			}
		}
	}
	return tasks, results, nil
}
