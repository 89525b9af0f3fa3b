package search

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/tree"
)

// nextByScan is next as it was before the stage index: a pass over every
// node of the tree for each node made. The index must choose the same.
func (t *Tree) nextByScan(p *Policy) (*tree.Node, bool) {
	id := fmt.Sprintf("n%04d", len(t.nodes)+1)
	expand := p.Expand
	if expand == "" {
		expand = Improve
	}
	drafts, open, openDrafts := 0, 0, 0
	var stage []*tree.Node
	for _, n := range t.nodes {
		if stageOf(n) != stageOf(&tree.Node{Stage: p.Stage}) {
			continue
		}
		stage = append(stage, n)
		if n.Kind == Draft {
			drafts++
		}
		if !n.Done {
			open++
			if n.Kind == Draft {
				openDrafts++
			}
		}
	}
	n := &tree.Node{ID: id, Kind: Draft, Stage: p.Stage}
	if p.Base == "" && drafts >= p.NumDrafts && openDrafts > 0 {
		return nil, true
	}
	if !(p.Base == "" && drafts < p.NumDrafts) {
		var debuggable []*tree.Node
		for _, c := range stage {
			if c.Done && c.Buggy && !c.NotRun && c.Depth < p.MaxDebugDepth && !t.hasChild(c.ID) {
				debuggable = append(debuggable, c)
			}
		}
		best, ok := bestOf(stage, p.Maximize)
		if b, found := t.byID[p.Base]; found && (!ok || !p.ExpandBest) {
			best, ok = *b, true
		}
		switch {
		case len(debuggable) > 0 && (!ok || p.Rand.Float64() < p.DebugProb):
			sort.Slice(debuggable, func(i, j int) bool { return tree.CompareIDs(debuggable[i].ID, debuggable[j].ID) < 0 })
			parent := debuggable[p.Rand.IntN(len(debuggable))]
			n.Parent, n.Kind, n.Depth = parent.ID, Debug, parent.Depth+1
		case ok:
			n.Parent, n.Kind = best.ID, expand
		case open > 0:
			return nil, true
		}
	}
	t.add(n)
	return n, false
}

// TestStageIndexChoosesAsAScan: over random searches (four stages, nodes
// finishing out of order, many buggy, metrics with ties, some not run, both
// directions), the tree's stage index makes the same node at every step as
// a scan of the whole tree, and its best of each stage is bestOf's.
func TestStageIndexChoosesAsAScan(t *testing.T) {
	t.Parallel()
	for seed := range uint64(40) {
		maximize := seed%2 == 0
		outcomes := rand.New(rand.NewPCG(seed, 7))
		a, b := NewTree(), NewTree()
		pa := Policy{NumDrafts: 3, DebugProb: 0.5, MaxDebugDepth: 2, Maximize: maximize, Rand: rand.New(rand.NewPCG(seed, 1))}
		pb := pa
		pb.Rand = rand.New(rand.NewPCG(seed, 1))
		var open []string
		finish := func() {
			i := outcomes.IntN(len(open))
			id := open[i]
			open = append(open[:i], open[i+1:]...)
			v := *a.byID[id]
			v.Done = true
			switch r := outcomes.IntN(10); {
			case r < 4:
				v.Buggy = true
				v.NotRun = r == 0
			default:
				v.Metric, v.HasMetric = float64(outcomes.IntN(4)), r != 9
			}
			a.set(a.byID[id], v)
			b.set(b.byID[id], v)
		}
		for stage := 1; stage <= 4; stage++ {
			pa.Stage, pb.Stage = stage, stage
			if stage == 2 || stage == 4 {
				if best, ok := bestOf(b.nodes, maximize); ok {
					pa.Base, pb.Base = best.ID, best.ID
				}
				pa.ExpandBest, pb.ExpandBest = stage == 2, stage == 2
			}
			for step := range 60 {
				na, waitA := a.next(&pa)
				nb, waitB := b.nextByScan(&pb)
				require.Equal(t, waitB, waitA, "seed %d stage %d step %d", seed, stage, step)
				if waitA {
					require.NotEmpty(t, open, "a wait with nothing running")
					finish()
					continue
				}
				require.Equal(t, *nb, *na, "seed %d stage %d step %d", seed, stage, step)
				open = append(open, na.ID)
				for len(open) > 0 && (len(open) > 6 || outcomes.IntN(3) == 0) {
					finish()
				}
				for _, m := range []bool{false, true} {
					var in []*tree.Node
					for _, n := range b.nodes {
						if stageOf(n) == stage {
							in = append(in, n)
						}
					}
					want, wok := bestOf(in, m)
					got, gok := a.BestOfStage(stage, m)
					require.Equal(t, wok, gok)
					require.Equal(t, want, got, "seed %d stage %d step %d maximize %v", seed, stage, step, m)
				}
			}
		}
	}
}

// TestDebuggableInIDOrder: the debuggable nodes are kept in the order the
// ids were made, past n9999 too (a seeded choice among them picks the same
// node as a scan in that order).
func TestDebuggableInIDOrder(t *testing.T) {
	t.Parallel()
	tr := NewTree()
	ids := []string{"n10000", "n0002", "n9999", "n10001", "n0100"}
	for _, id := range ids {
		tr.add(&tree.Node{ID: id, Kind: Draft, Stage: 1})
	}
	for _, id := range ids {
		v := *tr.byID[id]
		v.Done, v.Buggy = true, true
		tr.set(tr.byID[id], v)
	}
	debuggable := func() []string {
		var got []string
		for _, n := range tr.stages[stageOf(&tree.Node{Stage: 1})].debuggable {
			got = append(got, n.ID)
		}
		return got
	}
	require.Equal(t, []string{"n0002", "n0100", "n9999", "n10000", "n10001"}, debuggable())
	v := *tr.byID["n9999"]
	v.Buggy = false
	tr.set(tr.byID["n9999"], v)
	require.Equal(t, []string{"n0002", "n0100", "n10000", "n10001"}, debuggable())
}
