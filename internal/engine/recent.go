package engine

import (
	"cmp"
	"path/filepath"
	"sync"

	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// recentCap is how many nodes' tasks (and, apart, outcomes) are kept in
// memory. A node's prompt reads its parent's code, output and timings,
// and a parent has its children one after the other (a stage's base node
// thousands of them); 64 nodes are in flight by default. A task holds the
// node's code: 512 of 100 KB is 50 MB at most.
const recentCap = 512

// recent keeps the last values put or read, by node id, up to recentCap:
// the oldest put goes first. The zero value is ready. Values are shared
// between callers, which must not change them.
type recent[T any] struct {
	mu    sync.Mutex
	byID  map[string]*T
	ring  []string
	next  int
	limit int // recentCap when 0
}

func (r *recent[T]) get(id string) (*T, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.byID[id]
	return v, ok
}

func (r *recent[T]) put(id string, v *T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byID == nil {
		r.limit = cmp.Or(r.limit, recentCap)
		r.byID = make(map[string]*T, r.limit)
		r.ring = make([]string, 0, r.limit)
	}
	if _, ok := r.byID[id]; ok {
		r.byID[id] = v
		return
	}
	if len(r.ring) < r.limit {
		r.ring = append(r.ring, id)
	} else {
		delete(r.byID, r.ring[r.next])
		r.ring[r.next] = id
		r.next = (r.next + 1) % r.limit
	}
	r.byID[id] = v
}

// nodeTask is node id's task as published (nodes/<id>/task.json); ok is
// false when it has none (not prepared, or not run).
func (e *engine) nodeTask(id string) (*schema.NodeTask, bool, error) {
	if t, ok := e.tasks.get(id); ok {
		return t, true, nil
	}
	var t schema.NodeTask
	ok, err := rundir.ReadJSON(filepath.Join(e.dir, nodesDir, id, taskFile), &t)
	if err != nil || !ok {
		return nil, false, err
	}
	e.tasks.put(id, &t)
	return &t, true, nil
}

// nodeOutcome is how node id ended (nodes/<id>/result.json); ok is false
// before it ended.
func (e *engine) nodeOutcome(id string) (*rundir.Outcome, bool, error) {
	if o, ok := e.outcomes.get(id); ok {
		return o, true, nil
	}
	if e.isUnwritten(id) {
		return nil, false, nil
	}
	o, ok, err := rundir.Dir(e.dir).ReadOutcome(id)
	if err != nil || !ok {
		return nil, false, err
	}
	e.outcomes.put(id, &o)
	return &o, true, nil
}

// saveTask writes node id's task file and keeps the task.
func (e *engine) saveTask(id string, t *schema.NodeTask) error {
	if err := rundir.WriteJSON(filepath.Join(e.dir, nodesDir, id, taskFile), t); err != nil {
		return err
	}
	c := *t
	e.tasks.put(id, &c)
	return nil
}

// saveOutcome writes node id's result file and keeps the outcome.
func (e *engine) saveOutcome(id string, o *rundir.Outcome) error {
	if err := rundir.WriteJSON(filepath.Join(e.dir, nodesDir, id, outcomeFile), o); err != nil {
		return err
	}
	c := *o
	e.outcomes.put(id, &c)
	e.own.Store(id, ownNode{ended: true, cached: o.Cached}) // after put: a reader finds it kept or on disk
	return nil
}
