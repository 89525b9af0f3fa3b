package search

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"

	"github.com/hpcq/hpcq/internal/journal"
	"github.com/hpcq/hpcq/internal/tree"
	"github.com/hpcq/hpcq/pkg/schema"
)

// Kinds of nodes, as the task schema declares them.
const (
	Draft      = schema.KindDraft
	Debug      = schema.KindDebug
	Improve    = schema.KindImprove
	Hyperparam = schema.KindHyperparam
	Ablation   = schema.KindAblation
)

// Stages are the stages of a run, in order (schema.Stages).
var Stages = schema.Stages

// StageName names stage s (1-based); "" when out of range.
func StageName(s int) string { return schema.StageName(s) }

// Result is what running a node gave.
type Result struct {
	// NotRun: the node failed before it ran (its code could not be
	// written); it is not debugged.
	NotRun    bool
	Buggy     bool
	Reason    string
	Metric    float64
	HasMetric bool
	// Q1 and Q3: the quartiles of the repeats the metric is the median
	// of, when it was measured by repeats (HasSpread).
	Q1, Q3    float64
	HasSpread bool
}

// Runner runs one node and blocks until it is done: the real one publishes
// the node's task and waits for its result; the benchmark simulates. An
// error means the node could not run (it becomes buggy with the error as
// its reason); the search goes on.
type Runner interface {
	Run(ctx context.Context, n *tree.Node) (Result, error)
}

// RunnerFunc is a function as a Runner.
type RunnerFunc func(ctx context.Context, n *tree.Node) (Result, error)

// Run calls f.
func (f RunnerFunc) Run(ctx context.Context, n *tree.Node) (Result, error) { return f(ctx, n) }

// Policy chooses what to expand next (a stage of the tree search).
type Policy struct {
	// NumDrafts root nodes are drafted before anything else.
	NumDrafts int
	// DebugProb is the chance of debugging a buggy leaf rather than
	// improving the best node, when one can be debugged.
	DebugProb float64
	// MaxDebugDepth bounds chains of debug nodes.
	MaxDebugDepth int
	// Maximize the metric (else minimize).
	Maximize bool
	Rand     *rand.Rand
	// Stage the new nodes belong to (0: a search without stages). maxNodes
	// of Run counts this stage's nodes.
	Stage int
	// Base, when set, is the node this stage starts from (stages 2 and 4
	// start from the previous stage's best): no drafts are made, and
	// Expand nodes are children of Base, or with ExpandBest of the stage's
	// best node once it has one.
	Base       string
	Expand     string // kind of the nodes that expand a good one [Improve]
	ExpandBest bool
	// Stop, when set, is asked before every new node: true ends the
	// expansion (nodes running finish) and the reason is kept in
	// Stats.StoppedBy.
	Stop func() (bool, string)
}

// Tree is the nodes of a search, safe for concurrent use.
type Tree struct {
	mu    sync.Mutex
	nodes []*tree.Node
	byID  map[string]*tree.Node
	kids  map[string][]*tree.Node // by parent id, in creation order
	// done counts the done nodes; kinds the children of each parent by
	// kind (parent + "/" + kind): prompts say how many nodes they leave
	// out without counting them again for every prompt.
	done  int
	kinds map[string]int
	// stages: what choosing the next node asks of each stage, kept as nodes
	// are added and finish; pos: each node's place in nodes.
	stages map[int]*stageIndex
	pos    map[*tree.Node]int
	jr     *journal.Journal
	// err is the first journal error: the search stops starting nodes.
	err error
}

// NewTree returns an empty tree.
func NewTree() *Tree {
	return &Tree{byID: map[string]*tree.Node{}, kids: map[string][]*tree.Node{}, kinds: map[string]int{},
		stages: map[int]*stageIndex{}, pos: map[*tree.Node]int{}}
}

// add appends n; the caller holds t.mu (or owns t).
func (t *Tree) add(n *tree.Node) {
	t.pos[n] = len(t.nodes)
	t.nodes = append(t.nodes, n)
	t.byID[n.ID] = n
	if n.Parent != "" {
		t.kids[n.Parent] = append(t.kids[n.Parent], n)
		t.kinds[n.Parent+"/"+n.Kind]++
		if p := t.byID[n.Parent]; p != nil {
			t.stage(p).unlist(p) // it has a child now
		}
	}
	if n.Done {
		t.done++
	}
	si := t.stage(n)
	si.nodes = append(si.nodes, n)
	if n.Kind == Draft {
		si.drafts++
	}
	si.count(n, 1)
	t.index(si, n)
}

// count adds d to the stage's open nodes if n is open (not done).
func (si *stageIndex) count(n *tree.Node, d int) {
	if n.Done {
		return
	}
	si.open += d
	if n.Kind == Draft {
		si.openDrafts += d
	}
}

// set replaces the state of n, a node of t, with v (same id, parent and
// kind); the caller holds t.mu.
func (t *Tree) set(n *tree.Node, v tree.Node) {
	if v.Done != n.Done {
		if v.Done {
			t.done++
		} else {
			t.done--
		}
	}
	si := t.stage(n)
	if ranked(n) {
		si.stale = true // a ranked node changed (not in a run: nodes finish once)
	}
	si.unlist(n)
	si.count(n, -1)
	*n = v
	si.count(n, 1)
	t.index(si, n)
}

// stageIndex is what next asks of a stage, kept as nodes are added and
// finish: next went through every node of the tree for each node it made
// (2.5% of the scheduler's CPU at 10,000 nodes, and growing with them).
type stageIndex struct {
	nodes  []*tree.Node // in creation order
	drafts int
	// open nodes are made and not done (running, or to run again after a
	// resume); openDrafts those of them that are drafts.
	open, openDrafts int
	// best[1] is the best node when maximizing, best[0] when minimizing, as
	// bestOf over nodes finds it (the first made among equals); stale: to
	// be found again by bestOf (a ranked node changed, or a metric is NaN).
	best  [2]*tree.Node
	stale bool
	// debuggable: the done, buggy nodes that ran and have no child, in id
	// order (tree.CompareIDs: n9999 before n10000, the order they were made).
	debuggable []*tree.Node
}

// stage is n's stage's index; the caller holds t.mu.
func (t *Tree) stage(n *tree.Node) *stageIndex {
	si := t.stages[stageOf(n)]
	if si == nil {
		si = &stageIndex{}
		t.stages[stageOf(n)] = si
	}
	return si
}

// ranked: n counts for the best node.
func ranked(n *tree.Node) bool { return n.Done && !n.Buggy && n.HasMetric }

// index enters n, as it now is, in its stage's best and debuggable nodes.
func (t *Tree) index(si *stageIndex, n *tree.Node) {
	if ranked(n) && !si.stale {
		if math.IsNaN(n.Metric) || n.HasSpread {
			// Better over intervals depends on the order nodes are taken
			// in (creation order, by bestOf), not the order they finish.
			si.stale = true
		}
		for dir, maximize := range []bool{false, true} {
			b := si.best[dir]
			if b == nil || (maximize && n.Metric > b.Metric) || (!maximize && n.Metric < b.Metric) ||
				(n.Metric == b.Metric && t.pos[n] < t.pos[b]) {
				si.best[dir] = n
			}
		}
	}
	if n.Done && n.Buggy && !n.NotRun && !t.hasChild(n.ID) {
		i := sort.Search(len(si.debuggable), func(i int) bool { return tree.CompareIDs(si.debuggable[i].ID, n.ID) >= 0 })
		if i == len(si.debuggable) || si.debuggable[i] != n {
			si.debuggable = slices.Insert(si.debuggable, i, n)
		}
	}
}

// unlist takes n out of the debuggable nodes.
func (si *stageIndex) unlist(n *tree.Node) {
	i := sort.Search(len(si.debuggable), func(i int) bool { return tree.CompareIDs(si.debuggable[i].ID, n.ID) >= 0 })
	if i < len(si.debuggable) && si.debuggable[i] == n {
		si.debuggable = slices.Delete(si.debuggable, i, i+1)
	}
}

// bestNode is the stage's best node, as bestOf over its nodes.
func (si *stageIndex) bestNode(maximize bool) (tree.Node, bool) {
	if si.stale {
		best, ok := bestOf(si.nodes, maximize)
		if !ok {
			return tree.Node{}, false
		}
		return best, true
	}
	dir := 0
	if maximize {
		dir = 1
	}
	if b := si.best[dir]; b != nil {
		return *b, true
	}
	return tree.Node{}, false
}

// Children returns copies of the nodes whose parent is id, in creation
// order.
func (t *Tree) Children(id string) []tree.Node {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]tree.Node, len(t.kids[id]))
	for i, n := range t.kids[id] {
		out[i] = *n
	}
	return out
}

// LastDone returns copies of the last k done nodes (in creation order)
// other than except, and how many more done nodes come before them: a
// bounded view of a large tree for a prompt. It reads from the end of the
// tree until it has k, so its cost does not grow with the tree.
func (t *Tree) LastDone(k int, except string) (last []tree.Node, more int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	last = lastOf(t.nodes, k, func(n *tree.Node) bool { return n.Done && n.ID != except })
	total := t.done
	if x := t.byID[except]; x != nil && x.Done {
		total--
	}
	return last, total - len(last)
}

// LastSiblings returns copies of the last k nodes of id's kind and parent
// other than id itself (in creation order), and how many more there are
// before them.
func (t *Tree) LastSiblings(id string, k int) (last []tree.Node, more int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.byID[id]
	if n == nil || n.Parent == "" {
		return nil, 0
	}
	last = lastOf(t.kids[n.Parent], k, func(s *tree.Node) bool { return s.Kind == n.Kind && s.ID != id })
	return last, t.kinds[n.Parent+"/"+n.Kind] - 1 - len(last)
}

// lastOf returns copies of the last k of nodes that keep accepts, in
// their order, looking no further back than it must.
func lastOf(nodes []*tree.Node, k int, keep func(*tree.Node) bool) []tree.Node {
	last := make([]tree.Node, 0, min(k, len(nodes)))
	for i := len(nodes) - 1; i >= 0 && len(last) < k; i-- {
		if keep(nodes[i]) {
			last = append(last, *nodes[i])
		}
	}
	slices.Reverse(last)
	return last
}

// Nodes returns a copy of the nodes, in creation order.
func (t *Tree) Nodes() []tree.Node {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]tree.Node, len(t.nodes))
	for i, n := range t.nodes {
		out[i] = *n
	}
	return out
}

// Best is the done, non-buggy node with the best metric.
func (t *Tree) Best(maximize bool) (tree.Node, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.bestLocked(maximize)
}

func (t *Tree) bestLocked(maximize bool) (tree.Node, bool) { return bestOf(t.nodes, maximize) }

// bestOf is the best of the ranked nodes, taken in creation order: a
// node takes the place of the best so far only when it is Better, so that
// with measured noise the earlier, simpler node keeps its place.
func bestOf(nodes []*tree.Node, maximize bool) (tree.Node, bool) {
	var best *tree.Node
	for _, n := range nodes {
		if !n.Done || n.Buggy || !n.HasMetric {
			continue
		}
		if best == nil || tree.Better(*n, *best, maximize) {
			best = n
		}
	}
	if best == nil {
		return tree.Node{}, false
	}
	return *best, true
}

// Get returns a node by id.
func (t *Tree) Get(id string) (tree.Node, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.byID[id]
	if !ok {
		return tree.Node{}, false
	}
	return *n, true
}

// BestOfStage is the best node of one stage.
func (t *Tree) BestOfStage(stage int, maximize bool) (tree.Node, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stage(&tree.Node{Stage: stage}).bestNode(maximize)
}

// next creates the next node under the policy; the caller holds t.mu.
// The choice does not depend on how many nodes run at once: a stage makes
// its NumDrafts drafts, then waits for them all before its first other
// node, and never drafts again while a node it could build on is
// running. wait (with a nil node) says to wait for a node to finish;
// a nil node without it is a journal failure.
func (t *Tree) next(p *Policy) (_ *tree.Node, wait bool) {
	id := fmt.Sprintf("n%04d", len(t.nodes)+1)
	expand := p.Expand
	if expand == "" {
		expand = Improve
	}
	n := &tree.Node{ID: id, Kind: Draft, Stage: p.Stage}
	si := t.stage(n)
	switch {
	case p.Base == "" && si.drafts < p.NumDrafts:
	case p.Base == "" && si.openDrafts > 0:
		return nil, true
	default:
		var debuggable []*tree.Node // by id
		for _, c := range si.debuggable {
			if c.Depth < p.MaxDebugDepth {
				debuggable = append(debuggable, c)
			}
		}
		best, ok := si.bestNode(p.Maximize)
		if b, found := t.byID[p.Base]; found && (!ok || !p.ExpandBest) {
			best, ok = *b, true
		}
		switch {
		case len(debuggable) > 0 && (!ok || p.Rand.Float64() < p.DebugProb):
			parent := debuggable[p.Rand.IntN(len(debuggable))]
			n.Parent, n.Kind, n.Depth = parent.ID, Debug, parent.Depth+1
		case ok:
			n.Parent, n.Kind = best.ID, expand
		case si.open > 0:
			// Nothing good and nothing to debug yet, and a node still
			// running may give either.
			return nil, true
		default:
			// Nothing good and nothing to debug: another draft.
		}
	}
	if err := t.record(tree.Created, n); err != nil {
		t.err = err
		return nil, false
	}
	t.add(n)
	return n, false
}

// stageOf is a node's stage, 0 read as 1.
func stageOf(n *tree.Node) int { return max(n.Stage, 1) }

func (t *Tree) hasChild(id string) bool { return len(t.kids[id]) > 0 }

// Err is the journal's first error, if any: the tree stopped growing.
func (t *Tree) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}
