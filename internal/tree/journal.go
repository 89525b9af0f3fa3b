package tree

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

// Types of the journal's records.
const (
	Created  = "created"  // a node was made: it is recorded before it starts
	Finished = "finished" // a node ended: its result, recorded before the policy may use it
)

// Record is one state change of a node, as the tree's journal keeps it.
type Record struct {
	Type string    `json:"type"` // Created or Finished
	Node Node      `json:"node"`
	Time time.Time `json:"time"`
}

// Decode reads one journal record.
func Decode(p []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(p, &r); err != nil {
		return r, fmt.Errorf("tree journal: %w", err)
	}
	return r, nil
}

// list is the nodes a journal's records made, in creation order: a node
// created twice is kept once, and Finished replaces the node it names.
type list struct {
	nodes []Node
	byID  map[string]int
}

func (l *list) replay(p []byte) error {
	r, err := Decode(p)
	if err != nil {
		return err
	}
	i, ok := l.byID[r.Node.ID]
	switch {
	case r.Type == Created && !ok:
		l.byID[r.Node.ID] = len(l.nodes)
		l.nodes = append(l.nodes, r.Node)
	case r.Type == Finished && ok:
		l.nodes[i] = r.Node
	}
	return nil
}

// A Follower reads a tree journal as the search beside it appends to
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
type Follower struct {
	path string

	mu    sync.Mutex
	file  os.FileInfo // the file read so far; another (a run written anew) is read from its start
	files uint64      // the files read: 1 for the first
	off   int64       // just past the last record read
	nodes *list
	kept  map[keptKey]any // from file number files
}

type keptKey struct{ node, kind string }

// Follow returns a follower of the journal at path; nothing is read
// before Update.
func Follow(path string) *Follower { return &Follower{path: path} }

// Followed is this process's follower of the journal at path, shared by
// its readers (the node list, the run summary). Past maxFollowed journals
// all are dropped, to be read again from their start.
func Followed(path string) *Follower {
	followed.mu.Lock()
	defer followed.mu.Unlock()
	f := followed.byPath[path]
	if f == nil {
		if followed.byPath == nil || len(followed.byPath) >= maxFollowed {
			followed.byPath = map[string]*Follower{}
		}
		f = Follow(path)
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
	byPath map[string]*Follower
	kept   atomic.Int64
}

// Keep keeps v, what a caller made (kind names it) of the files of node,
// a node that ended in the journal's file number file (from Update).
func (f *Follower) Keep(file uint64, node, kind string, v any) {
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
func (f *Follower) Kept(file uint64, node, kind string) (any, bool) {
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
func (f *Follower) Update() (nodes []Node, file uint64, err error) {
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
	if f.nodes == nil || !os.SameFile(f.file, fi) || fi.Size() < f.off {
		f.nodes, f.file, f.off, f.kept = &list{byID: map[string]int{}}, fi, 0, nil
		f.files++
	}
	if fi.Size() > f.off {
		if f.off, err = journal.ReadFrom(fd, f.off, f.nodes.replay); err != nil {
			return nil, 0, fmt.Errorf("journal %s: %w", f.path, err)
		}
	}
	return slices.Clone(f.nodes.nodes), f.files, nil
}
