package engine

import (
	"cmp"
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

// nodeFiles reads and writes the nodes' task.json and result.json,
// keeping the last ones (recentCap of each): a node's prompt reads its
// parent's code and output, and a parent has many children.
type nodeFiles struct {
	dir string
	// oldPlans: the run was written when Phase 0's files were in plans/<id>/.
	oldPlans bool
	// unwritten says that a node's files are being made by this process
	// and its outcome is not saved yet: none is read from disk.
	unwritten func(id string) bool
	tasks     recent[schema.NodeTask]
	outcomes  recent[rundir.Outcome]
}

// task is node id's task as published (nodes/<id>/task.json); ok is
// false when it has none (not prepared, or not run).
func (f *nodeFiles) task(id string) (*schema.NodeTask, bool, error) {
	if t, ok := f.tasks.get(id); ok {
		return t, true, nil
	}
	var t schema.NodeTask
	ok, err := rundir.ReadJSON(rundir.Dir(f.dir).Path(rundir.NodeFile(id, taskFile)), &t)
	if err != nil || !ok {
		return nil, false, err
	}
	f.tasks.put(id, &t)
	return &t, true, nil
}

// outcome is how node id ended (nodes/<id>/result.json); ok is false
// while it has not.
func (f *nodeFiles) outcome(id string) (*rundir.Outcome, bool, error) {
	if o, ok := f.outcomes.get(id); ok {
		return o, true, nil
	}
	if f.unwritten != nil && f.unwritten(id) {
		return nil, false, nil
	}
	o, ok, err := rundir.Dir(f.dir).ReadOutcome(id)
	if err != nil || !ok {
		return nil, false, err
	}
	f.outcomes.put(id, &o)
	return &o, true, nil
}

// saveTask writes node id's task file and keeps the task.
func (f *nodeFiles) saveTask(id string, t *schema.NodeTask) error {
	if err := rundir.WriteJSON(rundir.Dir(f.dir).Path(rundir.NodeFile(id, taskFile)), t); err != nil {
		return err
	}
	c := *t
	f.tasks.put(id, &c)
	return nil
}

// saveOutcome writes node id's result file and keeps the outcome.
func (e *engine) saveOutcome(id string, o *rundir.Outcome) error {
	if err := rundir.WriteJSON(rundir.Dir(e.s.Dir).Path(rundir.NodeFile(id, outcomeFile)), o); err != nil {
		return err
	}
	c := *o
	e.files.outcomes.put(id, &c)
	e.own.Store(id, ownNode{ended: true, cached: o.Cached}) // after put: a reader finds it kept or on disk
	return nil
}
