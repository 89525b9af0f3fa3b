package search

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/hpcq/hpcq/internal/journal"
	"github.com/hpcq/hpcq/internal/tree"
)

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

// replay applies one journal record.
func (t *Tree) replay(p []byte) error {
	r, err := tree.Decode(p)
	if err != nil {
		return err
	}
	t.apply(r)
	return nil
}

// apply replays an event; the caller holds t.mu (or owns t).
func (t *Tree) apply(e tree.Record) {
	switch e.Type {
	case tree.Created:
		n := e.Node
		if _, ok := t.byID[n.ID]; ok {
			return
		}
		t.add(&n)
	case tree.Finished:
		if n, ok := t.byID[e.Node.ID]; ok {
			t.set(n, e.Node)
		}
	}
}

// record journals an event; the caller holds t.mu. Without a journal it
// does nothing.
func (t *Tree) record(typ string, n *tree.Node) error {
	if t.jr == nil {
		return nil
	}
	data, err := json.Marshal(tree.Record{Type: typ, Node: *n, Time: time.Now().UTC()})
	if err != nil {
		return err
	}
	if err := t.jr.Append(data); err != nil {
		return fmt.Errorf("tree journal: %w", err)
	}
	return nil
}

// Unfinished returns the nodes created but not done, in creation order.
func (t *Tree) Unfinished() []tree.Node {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []tree.Node
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
