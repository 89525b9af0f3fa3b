package gate

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/tree"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

func node(id string, stage int, metric float64) tree.Node {
	return tree.Node{ID: id, Stage: stage, Done: true, Metric: metric, HasMetric: true}
}

// TestPick: the search's top nodes by metric (ties: the earlier first),
// buggy and unfinished nodes never; the baseline is the first stage's
// best, gated once with both roles when it is also among the top.
func TestPick(t *testing.T) {
	nodes := []tree.Node{
		node("n0001", 1, 2.0), node("n0002", 1, 2.5), node("n0003", 2, 3.0), node("n0004", 3, 9.0),
		{ID: "n0005", Stage: 3, Done: true, Buggy: true, Metric: 99, HasMetric: true},
		{ID: "n0006", Stage: 3, Metric: 50, HasMetric: true},
		node("n0007", 3, 3.0),
	}
	cands, base := Pick(nodes, true, 3)
	require.Equal(t, "n0002", base)
	require.Equal(t, []Candidate{
		{Node: "n0004", Roles: []string{RoleTop}, SearchMetric: 9},
		{Node: "n0003", Roles: []string{RoleTop}, SearchMetric: 3},
		{Node: "n0007", Roles: []string{RoleTop}, SearchMetric: 3},
		{Node: "n0002", Roles: []string{RoleBaseline}, SearchMetric: 2.5},
	}, cands)

	cands, base = Pick(nodes, false, 2) // time: less is better
	require.Equal(t, "n0001", base)
	require.Equal(t, []Candidate{
		{Node: "n0001", Roles: []string{RoleTop, RoleBaseline}, SearchMetric: 2},
		{Node: "n0002", Roles: []string{RoleTop}, SearchMetric: 2.5},
	}, cands)

	cands, base = Pick([]tree.Node{{ID: "n0001", Done: true, Buggy: true}}, true, 3)
	require.Empty(t, cands)
	require.Empty(t, base)
}

func f(v float64) *float64 { return &v }

// TestDecide: the node correct only for the searched size is incorrect,
// the one whose win shrinks on the held-out inputs is overfit, the really
// faster one is the run's best; held-out inputs of another scale (every
// node slower alike) mark nobody, as the drop is of the speedup over the
// baseline; without the baseline's number the drop is of the metric.
func TestDecide(t *testing.T) {
	cands := []Candidate{
		{Node: "size-only", Roles: []string{RoleTop}, SearchMetric: 10},
		{Node: "faster", Roles: []string{RoleTop}, SearchMetric: 8},
		{Node: "lucky", Roles: []string{RoleTop}, SearchMetric: 6},
		{Node: "base", Roles: []string{RoleBaseline}, SearchMetric: 2},
		{Node: "gone", Roles: []string{RoleTop}, SearchMetric: 5},
	}
	answers := map[string]Answer{
		"size-only": {Incorrect: true, Reason: "incorrect on N=1000 (repeat 1): error 0.5 > 1e-09"},
		"faster":    {Metric: f(4)}, // the held-out sizes are half as fast for everyone
		"lucky":     {Metric: f(1.5)},
		"base":      {Metric: f(1)},
		"gone":      {Reason: "evaluate_failed in evaluate: exit status 2"},
	}
	g := Decide(cands, "base", answers, true, 0.2)
	require.True(t, g.Relative)
	require.Equal(t, "faster", g.Best)
	require.Equal(t, 4.0, *g.BestMetric)
	verdicts := map[string]rundir.GatedNode{}
	for _, n := range g.Nodes {
		verdicts[n.Node] = n
	}
	require.Equal(t, rundir.HeldIncorrect, verdicts["size-only"].Verdict)
	require.Contains(t, verdicts["size-only"].Reason, "incorrect on N=1000")
	require.Equal(t, rundir.HeldHeld, verdicts["faster"].Verdict, "4x the baseline here, 4x in the search")
	require.InDelta(t, 0, *verdicts["faster"].Drop, 1e-12)
	require.Equal(t, rundir.HeldOverfit, verdicts["lucky"].Verdict, "3x the baseline in the search, 1.5x here")
	require.InDelta(t, 0.5, *verdicts["lucky"].Drop, 1e-12)
	require.Contains(t, verdicts["lucky"].Reason, "50% below its standing")
	require.Equal(t, rundir.HeldHeld, verdicts["base"].Verdict)
	require.Equal(t, rundir.HeldFailed, verdicts["gone"].Verdict)
	require.Nil(t, verdicts["gone"].Drop)

	// Without the baseline's held-out number: the metric itself.
	delete(answers, "base")
	g = Decide(cands, "base", answers, true, 0.2)
	require.False(t, g.Relative)
	for _, n := range g.Nodes {
		if n.Node == "faster" {
			require.Equal(t, rundir.HeldOverfit, n.Verdict, "8 in the search, 4 here")
		}
	}

	// A time to minimize: 2 s in the search, 3 s held out is 50% worse.
	g = Decide([]Candidate{{Node: "t", Roles: []string{RoleTop}, SearchMetric: 2}}, "", map[string]Answer{"t": {Metric: f(3)}}, false, 0.2)
	require.Equal(t, rundir.HeldOverfit, g.Nodes[0].Verdict)
	require.InDelta(t, 0.5, *g.Nodes[0].Drop, 1e-12)
}

// TestAnswerOf: a held-out task's outcome read as the gate reads it.
func TestAnswerOf(t *testing.T) {
	v := 3.5
	require.Equal(t, Answer{Metric: &v}, AnswerOf(rundir.Outcome{Result: &schema.NodeResult{Evaluation: &schema.Evaluation{Metric: &v}}}))
	a := AnswerOf(rundir.Outcome{Result: &schema.NodeResult{Error: &schema.ResultError{Kind: schema.ErrKindIncorrect, Phase: schema.PhaseEvaluate, Message: "incorrect on N=7"}}})
	require.Equal(t, Answer{Incorrect: true, Reason: "incorrect on N=7"}, a)
	a = AnswerOf(rundir.Outcome{Result: &schema.NodeResult{Error: &schema.ResultError{Kind: schema.ErrKindCompileFailed, Phase: "compile", Message: "x"}}})
	require.Equal(t, "compile_failed in compile: x", a.Reason)
	require.False(t, a.Incorrect)
	require.Equal(t, "no answer", AnswerOf(rundir.Outcome{}).Reason)
	require.Equal(t, "dead-lettered: poison", AnswerOf(rundir.Outcome{DeadLetter: &rundir.DeadLetter{Reason: "poison"}}).Reason)
	require.Contains(t, AnswerOf(rundir.Outcome{Result: &schema.NodeResult{}}).Reason, "no metric")
}

// TestCountsLine: the liar (a claim of 5000, found incorrect) and the
// overclaimer (claims 10, measured 3) are rejected self-reports; the node
// found incorrect only at the gate counts as incorrect; the line names
// the gate's best.
func TestCountsLine(t *testing.T) {
	dir := rundir.Dir(t.TempDir())
	save := func(id string, o rundir.Outcome) tree.Node {
		o.Node = id
		require.NoError(t, os.MkdirAll(dir.Path(rundir.NodeFile(id)), 0o755))
		require.NoError(t, rundir.WriteJSON(dir.Path(rundir.NodeFile(id, rundir.ResultFile)), o))
		return tree.Node{ID: id, Done: true}
	}
	ev := func(v float64) *schema.Evaluation { return &schema.Evaluation{Correct: true, Metric: &v} }
	nodes := []tree.Node{
		save("liar", rundir.Outcome{Buggy: true, Result: &schema.NodeResult{Metrics: map[string]float64{"gflops": 5000},
			Error: &schema.ResultError{Kind: schema.ErrKindIncorrect, Phase: schema.PhaseEvaluateQuick}}}),
		save("over", rundir.Outcome{Metric: f(3), Result: &schema.NodeResult{Metrics: map[string]float64{"gflops": 10}, Evaluation: ev(3)}}),
		save("size", rundir.Outcome{Metric: f(9), Result: &schema.NodeResult{Metrics: map[string]float64{"gflops": 9.5}, Evaluation: ev(9)}}),
		save("fast", rundir.Outcome{Metric: f(8), Result: &schema.NodeResult{Metrics: map[string]float64{"gflops": 8.1}, Evaluation: ev(8)}}),
		save("broken", rundir.Outcome{Buggy: true, Result: &schema.NodeResult{Error: &schema.ResultError{Kind: schema.ErrKindCompileFailed, Phase: "compile"}}}),
		{ID: "unfinished"},
	}
	g := &rundir.Gate{Best: "fast", BestMetric: f(7.5), Nodes: []rundir.GatedNode{
		{Node: "size", Verdict: rundir.HeldIncorrect}, {Node: "fast", Verdict: rundir.HeldHeld}, {Node: "over", Verdict: rundir.HeldOverfit}}}
	c, err := Count(dir, nodes, "gflops", true, g)
	require.NoError(t, err)
	require.Equal(t, "evaluation nodes=4 correct=2 incorrect=2 self_report_rejected=3 held_out_best=fast held_out_metric=7.5 overfit=1", c.Line())

	c, err = Count(dir, nodes, "gflops", true, nil)
	require.NoError(t, err)
	require.Equal(t, "evaluation nodes=4 correct=3 incorrect=1 self_report_rejected=2 held_out_best=- held_out_metric=- overfit=0", c.Line())
}
