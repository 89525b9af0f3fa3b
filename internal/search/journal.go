package search

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hpcq/hpcq/internal/journal"
)

// event is one state change of a node, as the tree's journal keeps it.
type event struct {
	Type string    `json:"type"` // created or finished
	Node Node      `json:"node"`
	Time time.Time `json:"time"`
}

// OpenTree opens (creating if needed) a tree whose every state change is
// written to the journal at path before it is acted on: a node is recorded
// before it starts, and its result before the policy may use it. Reopening
// after a crash (kill -9 included) rebuilds the tree; nodes that were
// created but have no result are Unfinished, and Run runs them first.
func OpenTree(path string) (*Tree, error) {
	t := NewTree()
	jr, err := journal.Open(path, journal.Options{}, t.replay)
	if err != nil {
		return nil, err
	}
	t.jr = jr
	return t, nil
}

// ReadTree reads the tree a journal holds without opening it for writing:
// a reader beside the running search (scheduler ls).
func ReadTree(path string) (*Tree, error) {
	t := NewTree()
	if err := journal.Read(path, t.replay); err != nil {
		return nil, err
	}
	return t, nil
}

// A TreeFollower reads a tree journal as the search beside it appends to
// it (the dashboard, `scheduler ls`): each Update reads only the records
// appended since the last one. A 10,000-node journal is 6 MB, 0.15-0.2 s
// to read whole, and a going run appends to it every second. Its methods
// are safe for concurrent use.
//
// It also keeps what its callers made of the files of the nodes that
// ended (Keep, Kept): the engine writes a node's result.json before the
// journal records its end and writes none of an ended node's files again,
// so what was read of them after the journal said so is final, and
// listing the run again needs no stat of them (a run of 10,000 nodes was
// 20,000 stats at every listing of the dashboard's: 0.1 s on a local
// disk, more on a shared file system).
type TreeFollower struct {
	path string

	mu    sync.Mutex
	file  os.FileInfo // the file read so far; another (a run written anew) is read from its start
	files uint64      // the files read: 1 for the first
	off   int64       // just past the last record read
	tree  *Tree
	kept  map[keptKey]any // from file number files
}

type keptKey struct{ node, kind string }

// FollowTree returns a follower of the journal at path; nothing is read
// before Update.
func FollowTree(path string) *TreeFollower { return &TreeFollower{path: path} }

// Followed is this process's follower of the journal at path, shared by
// its readers (the node list, the run summary). Past maxFollowed journals
// all are dropped, to be read again from their start.
func Followed(path string) *TreeFollower {
	followed.mu.Lock()
	defer followed.mu.Unlock()
	f := followed.byPath[path]
	if f == nil {
		if followed.byPath == nil || len(followed.byPath) >= maxFollowed {
			followed.byPath = map[string]*TreeFollower{}
		}
		f = FollowTree(path)
		followed.byPath[path] = f
	}
	return f
}

// Past maxKept values kept by all followers, all are dropped.
const (
	maxFollowed = 256
	maxKept     = 400_000
)

var followed struct {
	mu     sync.Mutex
	byPath map[string]*TreeFollower
	kept   atomic.Int64
}

// Keep keeps v, what a caller made (kind names it) of the files of node,
// a node that ended in the journal's file number file (from Update).
func (f *TreeFollower) Keep(file uint64, node, kind string, v any) {
	if followed.kept.Add(1) > maxKept {
		dropKept()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if file != f.files {
		return
	}
	if f.kept == nil {
		f.kept = map[keptKey]any{}
	}
	f.kept[keptKey{node, kind}] = v
}

// Kept is what Keep kept of node under kind, from the journal's file
// number file.
func (f *TreeFollower) Kept(file uint64, node, kind string) (any, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if file != f.files {
		return nil, false
	}
	v, ok := f.kept[keptKey{node, kind}]
	return v, ok
}

// dropKept drops what every follower kept.
func dropKept() {
	followed.mu.Lock()
	all := slices.Collect(maps.Values(followed.byPath))
	followed.mu.Unlock()
	for _, f := range all {
		f.mu.Lock()
		f.kept = nil
		f.mu.Unlock()
	}
	followed.kept.Store(0)
}

// Update reads what was appended since the last Update (all of it the
// first time, or when the file was replaced or cut) and returns the
// tree's nodes in creation order, and which file they come from: a number
// that changes when the journal was replaced (a run directory written
// anew), so that what a caller kept of the nodes read before is dropped.
// A record being written is read by a later Update.
func (f *TreeFollower) Update() (nodes []Node, file uint64, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fd, err := os.Open(f.path)
	if err != nil {
		return nil, 0, err
	}
	defer fd.Close()
	fi, err := fd.Stat()
	if err != nil {
		return nil, 0, err
	}
	if f.tree == nil || !os.SameFile(f.file, fi) || fi.Size() < f.off {
		f.tree, f.file, f.off, f.kept = NewTree(), fi, 0, nil
		f.files++
	}
	if fi.Size() > f.off {
		if f.off, err = journal.ReadFrom(fd, f.off, f.tree.replay); err != nil {
			return nil, 0, fmt.Errorf("journal %s: %w", f.path, err)
		}
	}
	return f.tree.Nodes(), f.files, nil
}

// replay applies one journal record.
func (t *Tree) replay(p []byte) error {
	var e event
	if err := json.Unmarshal(p, &e); err != nil {
		return fmt.Errorf("tree journal: %w", err)
	}
	t.apply(e)
	return nil
}

// apply replays an event; the caller holds t.mu (or owns t).
func (t *Tree) apply(e event) {
	switch e.Type {
	case "created":
		n := e.Node
		if _, ok := t.byID[n.ID]; ok {
			return
		}
		t.add(&n)
	case "finished":
		if n, ok := t.byID[e.Node.ID]; ok {
			t.set(n, e.Node)
		}
	}
}

// record journals an event; the caller holds t.mu. Without a journal it
// does nothing.
func (t *Tree) record(typ string, n *Node) error {
	if t.jr == nil {
		return nil
	}
	data, err := json.Marshal(event{Type: typ, Node: *n, Time: time.Now().UTC()})
	if err != nil {
		return err
	}
	if err := t.jr.Append(data); err != nil {
		return fmt.Errorf("tree journal: %w", err)
	}
	return nil
}

// Unfinished returns the nodes created but not done, in creation order.
func (t *Tree) Unfinished() []Node {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Node
	for _, n := range t.nodes {
		if !n.Done {
			out = append(out, *n)
		}
	}
	return out
}

// Close closes the journal.
func (t *Tree) Close() error {
	if t.jr == nil {
		return nil
	}
	return t.jr.Close()
}
