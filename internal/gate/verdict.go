package gate

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/hpcq/hpcq/internal/tree"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// Roles of a gated node.
const (
	RoleTop      = "top"
	RoleBaseline = "baseline"
)

// Candidate is a node the gate evaluates on the held-out inputs.
type Candidate struct {
	Node         string
	Roles        []string
	SearchMetric float64
}

// ranked: the node ran and has the run's metric (a buggy node never does).
func ranked(n tree.Node) bool { return n.Done && !n.Buggy && n.HasMetric }

// Pick chooses the gate's nodes: the top best nodes of the search by their
// search metric (ties: the earlier node first), and the baseline: the best
// node of the first stage, the working implementation the later stages
// improved (a node of both is gated once, with both roles).
func Pick(nodes []tree.Node, maximize bool, top int) (cands []Candidate, baseline string) {
	var good []tree.Node
	for _, n := range nodes {
		if ranked(n) {
			good = append(good, n)
		}
	}
	better := func(a, b tree.Node) int {
		c := cmp.Compare(b.Metric, a.Metric)
		if !maximize {
			c = -c
		}
		return cmp.Or(c, tree.CompareIDs(a.ID, b.ID))
	}
	slices.SortStableFunc(good, better)
	for _, n := range good {
		if max(n.Stage, 1) == 1 {
			baseline = n.ID
			break
		}
	}
	for i, n := range good {
		var roles []string
		if i < top {
			roles = append(roles, RoleTop)
		}
		if n.ID == baseline {
			roles = append(roles, RoleBaseline)
		}
		if len(roles) > 0 {
			cands = append(cands, Candidate{Node: n.ID, Roles: roles, SearchMetric: n.Metric})
		}
	}
	return cands, baseline
}

// Answer is what a candidate's held-out task gave: the harness's metric,
// or why there is none.
type Answer struct {
	Metric *float64
	// Incorrect: the harness found the node wrong (Reason in its words);
	// otherwise a nil Metric is a failure of the task, not a verdict.
	Incorrect bool
	Reason    string
}

// AnswerOf reads a held-out task's outcome.
func AnswerOf(o rundir.Outcome) Answer {
	r := o.Result
	switch {
	case o.DeadLetter != nil:
		return Answer{Reason: "dead-lettered: " + o.DeadLetter.Reason}
	case o.Bound != nil && o.Bound.Impossible:
		return Answer{Reason: o.Reason}
	case r == nil:
		return Answer{Reason: "no answer"}
	case r.Error != nil && r.Error.Kind == schema.ErrKindIncorrect:
		return Answer{Incorrect: true, Reason: r.Error.Message}
	case r.Error != nil:
		return Answer{Reason: fmt.Sprintf("%s in %s: %s", r.Error.Kind, r.Error.Phase, r.Error.Message)}
	case r.Evaluation == nil || r.Evaluation.Metric == nil:
		return Answer{Reason: "the harness gave no metric on the held-out inputs"}
	}
	v := *r.Evaluation.Metric
	return Answer{Metric: &v}
}

// Decide is the gate's verdict: each candidate held, overfit, incorrect
// or failed, and the run's best, the correct node with the best held-out
// metric. A node is overfit when its standing falls by more than share:
// its speedup over the baseline when the baseline has a held-out metric
// (held-out inputs of another scale then move every node alike and mark
// none), else its metric itself.
func Decide(cands []Candidate, baseline string, answers map[string]Answer, maximize bool, share float64) rundir.Gate {
	g := rundir.Gate{OverfitShare: share, Baseline: baseline}
	var base Candidate
	var baseHeld *float64
	for _, c := range cands {
		if c.Node == baseline {
			base, baseHeld = c, answers[c.Node].Metric
		}
	}
	g.Relative = baseHeld != nil && *baseHeld > 0 && base.SearchMetric > 0
	for _, c := range cands {
		a := answers[c.Node]
		n := rundir.GatedNode{Node: c.Node, Roles: c.Roles, SearchMetric: c.SearchMetric, HeldOutMetric: a.Metric, Reason: a.Reason}
		switch {
		case a.Incorrect:
			n.Verdict = rundir.HeldIncorrect
		case a.Metric == nil:
			n.Verdict = rundir.HeldFailed
		default:
			n.Verdict = rundir.HeldHeld
			if d, ok := drop(c.SearchMetric, *a.Metric, base.SearchMetric, baseHeld, g.Relative, maximize); ok {
				n.Drop = &d
				if d > share {
					n.Verdict = rundir.HeldOverfit
					n.Reason = fmt.Sprintf("%.0f%% below its standing in the search (the gate allows %.0f%%)", 100*d, 100*share)
				}
			}
			if g.BestMetric == nil || better(*a.Metric, *g.BestMetric, maximize) {
				v := *a.Metric
				g.Best, g.BestMetric = c.Node, &v
			}
		}
		g.Nodes = append(g.Nodes, n)
	}
	return g
}

func better(a, b float64, maximize bool) bool {
	if maximize {
		return a > b
	}
	return a < b
}

// drop is the share by which a node's standing fell from the search to
// the held-out inputs: of its speedup over the baseline (relative), else
// of its metric; positive is worse. ok is false where it has no meaning
// (a search metric of 0, a ratio with a non-positive side).
func drop(search, held, baseSearch float64, baseHeld *float64, relative, maximize bool) (float64, bool) {
	if relative {
		search, held = search/baseSearch, held / *baseHeld
	}
	if search == 0 || (relative && (search <= 0 || held <= 0)) {
		return 0, false
	}
	if maximize {
		return (search - held) / search, true
	}
	return (held - search) / search, true
}
