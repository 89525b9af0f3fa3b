package writeup

import (
	"context"
	"fmt"

	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// node is a nodes row as the facts read it.
type node struct {
	stage        int
	kind, parent string
	metric       *float64
	// heldOut is the held-out gate's verdict ("" when not gated) and
	// heldMetric its metric on the held-out inputs.
	heldOut    string
	heldMetric *float64
}

// nodeRows reads the run's nodes; gateCols is false for a results file
// written before the nodes had the held-out gate's columns.
func nodeRows(ctx context.Context, q Query, final, run string) (t *results.Table, gateCols bool, err error) {
	const cols = "node, stage, kind, parent, metric_value"
	from := " FROM nodes" + final + " WHERE run = " + run + " ORDER BY node"
	if t, err = q(ctx, "SELECT "+cols+", held_out, held_out_metric"+from); err == nil {
		return t, true, nil
	}
	if t, err2 := q(ctx, "SELECT "+cols+from); err2 == nil {
		return t, false, nil
	}
	return nil, false, fmt.Errorf("writeup: the run's nodes: %w", err)
}

// heldOut is what the held-out gate left in the nodes rows.
type heldOut struct {
	gated              []string
	incorrect, overfit int
	// best is the correct gated node with the best held-out metric ("":
	// none, or no gate).
	best string
}

func heldOutNodes(byID map[string]node, ids []string, maximize bool) heldOut {
	var h heldOut
	for _, id := range ids {
		n := byID[id]
		switch n.heldOut {
		case "":
			continue
		case rundir.HeldIncorrect:
			h.incorrect++
		case rundir.HeldOverfit:
			h.overfit++
		}
		h.gated = append(h.gated, id)
		if n.heldMetric == nil || n.metric == nil || n.heldOut == rundir.HeldIncorrect {
			continue
		}
		if b, ok := byID[h.best]; !ok || maximize && *n.heldMetric > *b.heldMetric || !maximize && *n.heldMetric < *b.heldMetric {
			h.best = id
		}
	}
	return h
}

// heldOutFacts are the held-out gate's facts: the run's best's metric on
// the held-out inputs, each gated node's, and how many nodes the gate
// evaluated, found wrong and found overfit. The inputs themselves are
// never a fact.
func heldOutFacts(h heldOut, byID map[string]node, r Run, final, run string, describe func(string) string) []rundir.Fact {
	if len(h.gated) == 0 {
		return nil
	}
	nodesSQL := "SELECT count(*) FROM nodes" + final + " WHERE run = " + run
	facts := []rundir.Fact{
		{ID: "held_out.gated", Claim: "nodes evaluated on the held-out inputs (the search's best and the baseline)", Value: float64(len(h.gated)), Kind: rundir.FactCount,
			SQL: nodesSQL + " AND held_out <> ''"},
		{ID: "held_out.incorrect", Claim: "nodes of the search found wrong on the held-out inputs", Value: float64(h.incorrect), Kind: rundir.FactCount,
			SQL: nodesSQL + " AND held_out = " + quote(rundir.HeldIncorrect)},
		{ID: "held_out.overfit", Claim: "nodes whose standing fell past the gate's share on the held-out inputs (overfit)", Value: float64(h.overfit), Kind: rundir.FactCount,
			SQL: nodesSQL + " AND held_out = " + quote(rundir.HeldOverfit)},
	}
	heldSQL := func(id string) string {
		return "SELECT held_out_metric FROM nodes" + final + " WHERE run = " + run + " AND node = " + quote(id)
	}
	if h.best != "" {
		facts = append(facts, rundir.Fact{ID: "held_out.best", Claim: fmt.Sprintf("%s of the run's best on the held-out inputs, measured by the evaluator: %s",
			r.Metric, describe(h.best)), Value: *byID[h.best].heldMetric, Unit: r.Unit, Kind: rundir.FactMetric, Node: h.best, SQL: heldSQL(h.best)})
	}
	for _, id := range h.gated {
		if m := byID[id].heldMetric; m != nil {
			facts = append(facts, rundir.Fact{ID: id + ".held_out", Claim: fmt.Sprintf("%s of %s on the held-out inputs (%s there)", r.Metric, describe(id),
				byID[id].heldOut), Value: *m, Unit: r.Unit, Kind: rundir.FactMetric, Node: id, SQL: heldSQL(id)})
		}
	}
	return facts
}
