package search

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/tree"
)

// fake runs nodes for a duration by kind, counting concurrency; nodes whose
// id is in fail return an error, in buggy are buggy.
type fake struct {
	mu      sync.Mutex
	ran     map[string]int
	cur     atomic.Int64
	maxCur  atomic.Int64
	fail    map[string]bool
	buggy   func(n *tree.Node) bool
	metric  func(n *tree.Node) float64
	sleep   func(n *tree.Node) time.Duration
	parents map[string]string
}

func (f *fake) Run(ctx context.Context, n *tree.Node) (Result, error) {
	c := f.cur.Add(1)
	defer f.cur.Add(-1)
	for {
		m := f.maxCur.Load()
		if c <= m || f.maxCur.CompareAndSwap(m, c) {
			break
		}
	}
	f.mu.Lock()
	if f.ran == nil {
		f.ran, f.parents = map[string]int{}, map[string]string{}
	}
	f.ran[n.ID]++
	f.parents[n.ID] = n.Parent
	f.mu.Unlock()
	if f.sleep != nil {
		time.Sleep(f.sleep(n)) //nolint:forbidigo // the node's run time is the test
	}
	if f.fail[n.ID] {
		return Result{}, errors.New("worker lost")
	}
	if f.buggy != nil && f.buggy(n) {
		return Result{Buggy: true, Reason: "segfault"}, nil
	}
	m := 1.0
	if f.metric != nil {
		m = f.metric(n)
	}
	return Result{Metric: m, HasMetric: true}, nil
}

func policy() Policy {
	return Policy{NumDrafts: 3, DebugProb: 1, MaxDebugDepth: 2, Maximize: true, Rand: rand.New(rand.NewPCG(1, 1))}
}

// TestRunEveryNodeOnce: every node runs exactly once, never more than
// slots at a time, failures become buggy nodes and the search goes on.
func TestRunEveryNodeOnce(t *testing.T) {
	t.Parallel()
	for _, mode := range []Mode{Async, Lockstep} {
		f := &fake{fail: map[string]bool{"n0002": true}, sleep: func(*tree.Node) time.Duration { return time.Millisecond }}
		tr := NewTree()
		st := Run(context.Background(), tr, policy(), f, 3, 40, mode)
		require.Equal(t, 40, st.Nodes)
		require.Len(t, f.ran, 40)
		for id, n := range f.ran {
			require.Equal(t, 1, n, id)
		}
		require.LessOrEqual(t, f.maxCur.Load(), int64(3))
		nodes := tr.Nodes()
		require.True(t, nodes[1].Buggy)
		require.Equal(t, "worker lost", nodes[1].Reason)
		for _, n := range nodes {
			require.True(t, n.Done)
		}
		require.Greater(t, st.Utilization, 0.0)
	}
}

// TestPolicy: drafts first; buggy leaves are debugged (within the depth);
// otherwise the best node is improved.
func TestPolicy(t *testing.T) {
	t.Parallel()
	f := &fake{
		buggy:  func(n *tree.Node) bool { return n.Kind == Draft && n.ID == "n0001" || n.Kind == Debug },
		metric: func(n *tree.Node) float64 { return map[string]float64{"n0002": 5, "n0003": 9}[n.ID] },
	}
	tr := NewTree()
	Run(context.Background(), tr, policy(), f, 1, 12, Async)
	nodes := tr.Nodes()
	for _, n := range nodes[:3] {
		require.Equal(t, Draft, n.Kind, n.ID)
		require.Empty(t, n.Parent)
	}
	// n0001 is buggy: debugged (and its debug children too, up to depth 2).
	require.Equal(t, Debug, nodes[3].Kind)
	require.Equal(t, "n0001", nodes[3].Parent)
	require.Equal(t, 1, nodes[3].Depth)
	require.Equal(t, Debug, nodes[4].Kind)
	require.Equal(t, nodes[3].ID, nodes[4].Parent)
	require.Equal(t, 2, nodes[4].Depth)
	// Depth 2 reached: the best node (n0003, metric 9) is improved.
	require.Equal(t, Improve, nodes[5].Kind)
	require.Equal(t, "n0003", nodes[5].Parent)
	best, ok := tr.Best(true)
	require.True(t, ok)
	require.Equal(t, 9.0, best.Metric)
	worst, ok := tr.Best(false)
	require.True(t, ok)
	require.NotEqual(t, best.ID, worst.ID)
}

// TestAsyncKeepsSlotsBusy: with very uneven durations, asynchronous
// expansion keeps the slots busier than lockstep batches (no timing
// asserted beyond the ordering of the two).
func TestAsyncKeepsSlotsBusy(t *testing.T) {
	t.Parallel()
	uneven := func(n *tree.Node) time.Duration {
		if n.ID[len(n.ID)-1]%4 == 0 {
			return 40 * time.Millisecond
		}
		return 2 * time.Millisecond
	}
	a := Run(context.Background(), NewTree(), policy(), &fake{sleep: uneven}, 4, 40, Async)
	l := Run(context.Background(), NewTree(), policy(), &fake{sleep: uneven}, 4, 40, Lockstep)
	require.Greater(t, a.Utilization, l.Utilization)
}

func TestRunStopsWithContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	f := &fake{sleep: func(*tree.Node) time.Duration { return 5 * time.Millisecond }}
	go func() { time.Sleep(30 * time.Millisecond); cancel() }() //nolint:forbidigo // canceled while nodes run
	st := Run(ctx, NewTree(), policy(), f, 2, 10000, Async)
	require.Less(t, st.Nodes, 10000)
	require.Equal(t, st.Nodes, len(f.ran), "every started node finished")
}

// TestResume: a tree reopened from its journal after a crash keeps every
// finished node, runs the node that was started but never finished, and
// grows on to the target; no node runs twice.
func TestResume(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tr.journal")
	tr, err := OpenTree(path)
	require.NoError(t, err)
	f := &fake{sleep: func(*tree.Node) time.Duration { return time.Millisecond }}
	st := Run(context.Background(), tr, policy(), f, 2, 6, Async)
	require.Equal(t, 6, st.Nodes)
	// The crash: a node created (journaled) whose result never came.
	tr.mu.Lock()
	lost, _ := tr.next(&Policy{NumDrafts: 10, Rand: rand.New(rand.NewPCG(3, 3))})
	tr.mu.Unlock()
	require.NotNil(t, lost)
	require.NoError(t, tr.Close()) // a kill -9 leaves the same file: every record is one write

	tr, err = OpenTree(path)
	require.NoError(t, err)
	defer tr.Close()
	require.Len(t, tr.Nodes(), 7)
	un := tr.Unfinished()
	require.Len(t, un, 1)
	require.Equal(t, lost.ID, un[0].ID)
	st = Run(context.Background(), tr, policy(), f, 2, 10, Async)
	require.Equal(t, 4, st.Nodes, "the unfinished node and three new ones")
	require.Len(t, tr.Nodes(), 10)
	require.Empty(t, tr.Unfinished())
	require.Len(t, f.ran, 10)
	for id, n := range f.ran {
		require.Equal(t, 1, n, "node %s ran %d times", id, n)
	}
	for _, n := range tr.Nodes()[:6] {
		require.True(t, n.Done)
		require.False(t, n.Started.IsZero(), "finished nodes keep their times across the reopen")
	}
	require.NoError(t, tr.Err())
}

// TestStages: a later stage starts from the previous stage's best node,
// counts only its own nodes, makes no drafts, and Stop ends it cleanly.
func TestStages(t *testing.T) {
	t.Parallel()
	f := &fake{metric: func(n *tree.Node) float64 { return float64(len(n.ID) + int(n.ID[len(n.ID)-1])) }}
	tr := NewTree()
	p := policy()
	p.Stage = 1
	Run(context.Background(), tr, p, f, 2, 5, Async)
	best1, ok := tr.BestOfStage(1, true)
	require.True(t, ok)

	p2 := policy()
	p2.Stage, p2.Base, p2.Expand = 4, best1.ID, Ablation
	st := Run(context.Background(), tr, p2, f, 2, 3, Async)
	require.Equal(t, 3, st.Nodes)
	var stage4 []tree.Node
	for _, n := range tr.Nodes() {
		if n.Stage == 4 {
			stage4 = append(stage4, n)
		}
	}
	require.Len(t, stage4, 3)
	for _, n := range stage4 {
		require.Equal(t, Ablation, n.Kind)
		require.Equal(t, best1.ID, n.Parent, "every ablation is a child of the base")
	}

	calls := 0
	p3 := policy()
	p3.Stage, p3.Base, p3.Expand, p3.ExpandBest = 2, best1.ID, Hyperparam, true
	p3.Stop = func() (bool, string) {
		calls++
		return calls > 2, "budget: 10 tokens reached the budget of 10"
	}
	st = Run(context.Background(), tr, p3, f, 1, 10, Async)
	require.Equal(t, 2, st.Nodes)
	require.Contains(t, st.StoppedBy, "budget")
	first, _ := tr.Get("n0009")
	require.Equal(t, best1.ID, first.Parent)
	second, _ := tr.Get("n0010")
	require.Equal(t, Hyperparam, second.Kind)
	require.Equal(t, "n0009", second.Parent, "with ExpandBest, the stage's own best once it has one")
}

// notRunner fails every draft before it runs.
type notRunner struct{ kinds []string }

func (r *notRunner) Run(_ context.Context, n *tree.Node) (Result, error) {
	r.kinds = append(r.kinds, n.Kind)
	return Result{Buggy: true, NotRun: true, Reason: "no usable reply"}, nil
}

// TestNotRunIsNotDebugged: a node that never ran has no code to debug: the
// policy drafts again instead.
func TestNotRunIsNotDebugged(t *testing.T) {
	t.Parallel()
	r := &notRunner{}
	Run(context.Background(), NewTree(), policy(), r, 1, 6, Async)
	require.Equal(t, []string{Draft, Draft, Draft, Draft, Draft, Draft}, r.kinds)
}

// TestLastViews: LastSiblings gives the last k children of a node's parent
// of its kind, the node aside, in creation order, and how many more there
// are; LastDone the last k done nodes but one and how many more; both keep
// their counts through nodes finishing and a journal replayed.
func TestLastViews(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "tr.journal")
	tr, err := OpenTree(dir)
	require.NoError(t, err)
	build := func(tr *Tree) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		root := &tree.Node{ID: "root"}
		tr.add(root)
		require.NoError(t, tr.record("created", root))
		for i := range 30 {
			kind := Improve
			if i%3 == 0 {
				kind = Debug
			}
			for _, n := range []*tree.Node{{ID: fmt.Sprintf("c%02d", i), Parent: "root", Kind: kind}, {ID: fmt.Sprintf("g%02d", i), Parent: "c00", Kind: Improve}} {
				tr.add(n)
				require.NoError(t, tr.record("created", n))
			}
		}
	}
	build(tr)
	ids := func(nodes []tree.Node) []string {
		var out []string
		for _, n := range nodes {
			out = append(out, n.ID)
		}
		return out
	}
	last, more := tr.LastSiblings("c29", 5)
	require.Equal(t, []string{"c22", "c23", "c25", "c26", "c28"}, ids(last))
	require.Equal(t, 14, more, "20 improve children of root, c29 left out, 5 listed")
	last, more = tr.LastSiblings("c03", 2)
	require.Equal(t, []string{"c24", "c27"}, ids(last), "its debug siblings")
	require.Equal(t, 7, more)
	last, more = tr.LastSiblings("root", 5)
	require.Empty(t, last)
	require.Zero(t, more)
	last, more = tr.LastSiblings("nobody", 5)
	require.Empty(t, last)
	require.Zero(t, more)

	last, more = tr.LastDone(5, "")
	require.Empty(t, last)
	require.Zero(t, more)
	finish := func(tr *Tree, id string) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		n := tr.byID[id]
		fin := *n
		fin.Done = true
		require.NoError(t, tr.record("finished", &fin))
		tr.set(n, fin)
	}
	for _, id := range []string{"c01", "g01", "c05", "g07", "c10", "g10", "c20"} {
		finish(tr, id)
	}
	last, more = tr.LastDone(3, "g10")
	require.Equal(t, []string{"g07", "c10", "c20"}, ids(last))
	require.Equal(t, 3, more, "7 done, g10 left out, 3 listed")
	last, more = tr.LastDone(3, "c02")
	require.Equal(t, []string{"c10", "g10", "c20"}, ids(last))
	require.Equal(t, 4, more, "c02 is not done: nothing more left out")
	require.NoError(t, tr.Close())

	// Replayed from its journal, the tree counts the same.
	again, err := OpenTree(dir)
	require.NoError(t, err)
	defer again.Close()
	last, more = again.LastDone(3, "g10")
	require.Equal(t, []string{"g07", "c10", "c20"}, ids(last))
	require.Equal(t, 3, more)
	last, more = again.LastSiblings("c29", 5)
	require.Equal(t, []string{"c22", "c23", "c25", "c26", "c28"}, ids(last))
	require.Equal(t, 14, more)
}

// TestChoicesIndependentOfSlots: how many nodes run at once decides only
// when they run, not what the search makes: a stage makes its num_drafts
// drafts (no more while they run), debugs the buggy one once they are
// all done, then improves; the kinds made are the same with 1, 2 or 8
// slots and nodes finishing in any order.
func TestChoicesIndependentOfSlots(t *testing.T) {
	t.Parallel()
	kinds := func(slots int, seed uint64) map[string]int {
		jitter := rand.New(rand.NewPCG(seed, 9))
		var mu sync.Mutex
		f := &fake{
			buggy:  func(n *tree.Node) bool { return n.ID == "n0001" },
			metric: func(n *tree.Node) float64 { return float64(len(n.ID)) },
			sleep: func(*tree.Node) time.Duration {
				mu.Lock()
				defer mu.Unlock()
				return time.Duration(jitter.IntN(4)) * time.Millisecond
			},
		}
		p := Policy{NumDrafts: 2, DebugProb: 1, MaxDebugDepth: 3, Maximize: true, Rand: rand.New(rand.NewPCG(1, 1))}
		tr := NewTree()
		Run(context.Background(), tr, p, f, slots, 6, Async)
		got := map[string]int{}
		for _, n := range tr.Nodes() {
			got[n.Kind]++
		}
		return got
	}
	want := map[string]int{Draft: 2, Debug: 1, Improve: 3}
	for _, slots := range []int{1, 2, 8} {
		for seed := range uint64(5) {
			require.Equal(t, want, kinds(slots, seed), "%d slots, seed %d", slots, seed)
		}
	}
}

// TestBetterBeyondTheNoise: with measured quartiles a node is better only
// beyond the noise (its lower quartile above the other's median, maximizing),
// so the earlier node keeps its place against a lucky later one; without
// intervals the metric decides, as before.
func TestBetterBeyondTheNoise(t *testing.T) {
	n := func(id string, m, lo, hi float64) tree.Node {
		return tree.Node{ID: id, Done: true, HasMetric: true, Metric: m, Q1: lo, Q3: hi, HasSpread: lo != 0 || hi != 0}
	}
	a, lucky, real := n("a", 10, 9, 11), n("b", 10.5, 9.2, 11.8), n("c", 13, 12, 14)
	require.False(t, tree.Better(lucky, a, true), "10.5 inside a's noise")
	require.True(t, tree.Better(real, a, true))
	require.False(t, tree.Better(a, lucky, true))
	require.True(t, tree.Better(n("x", 2, 0, 0), n("y", 1, 0, 0), true), "no intervals: the metric")
	require.False(t, tree.Better(n("x", 10.8, 0, 0), a, true), "only b has one: inside its interval")
	require.True(t, tree.Better(n("x", 11.5, 0, 0), a, true), "beyond its upper bound")
	require.False(t, tree.Better(n("x", 11.5, 0, 0), a, false))
	// Minimizing (a time): below the other's median with its upper bound.
	require.True(t, tree.Better(n("t1", 1, 0.9, 1.1), n("t0", 2, 1.8, 2.2), false))
	require.False(t, tree.Better(n("t1", 1.9, 1.7, 2.1), n("t0", 2, 1.8, 2.2), false))

	tr := NewTree()
	for _, x := range []tree.Node{a, lucky} {
		x := x
		x.Stage = 1
		tr.add(&x)
	}
	best, ok := tr.Best(true)
	require.True(t, ok)
	require.Equal(t, "a", best.ID, "the lucky later node does not take the place of the earlier one")
	best, ok = tr.BestOfStage(1, true)
	require.True(t, ok)
	require.Equal(t, "a", best.ID)
	c := real
	c.Stage = 1
	tr.add(&c)
	best, _ = tr.BestOfStage(1, true)
	require.Equal(t, "c", best.ID, "a node beyond the noise does")
}
