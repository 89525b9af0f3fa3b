package rundir

import "strings"

// The held-out gate's files (internal/gate; docs/evaluation.md): when the
// search ends, the best nodes and the baseline are evaluated on inputs no
// prompt, memory or node saw.
const (
	// GateFile is the gate's verdict (Gate), written when it ends.
	GateFile = "gate.json"
	// GateDir holds the outcome of each gated node's held-out task:
	// gate/<node>.json (an Outcome of the task <node>-held-out).
	GateDir = "gate"
)

// HeldOutSuffix ends the node id of a node's held-out task: its task,
// phase_runs and metrics rows are those of <node>-held-out, so that they
// never mix with the node's own.
const HeldOutSuffix = "-held-out"

// Verdicts of a gated node (results' nodes.held_out).
const (
	// HeldHeld: correct on the held-out inputs, its metric within the
	// gate's share of its search metric.
	HeldHeld = "held"
	// HeldOverfit: correct, but its metric fell below its search metric by
	// more than the gate's share.
	HeldOverfit = "overfit"
	// HeldIncorrect: the harness found it wrong on a held-out input.
	HeldIncorrect = "incorrect"
	// HeldFailed: its held-out task failed (the harness, a worker): no
	// verdict on the node.
	HeldFailed = "failed"
)

// Gate is the held-out gate's verdict on a run (gate.json). The held-out
// inputs themselves are not in it: only how many there were (they stay in
// run.yaml, out of every file a later prompt could read).
type Gate struct {
	// Inputs is how many held-out inputs the nodes were evaluated on.
	Inputs       int     `json:"inputs"`
	Top          int     `json:"top"`
	OverfitShare float64 `json:"overfit_share"`
	// Baseline is the node the others are compared with (the best node of
	// the first stage: the working implementation the search improved).
	Baseline string `json:"baseline,omitempty"`
	// Relative: each node's drop is of its speedup over the baseline
	// (both measured on their own inputs), not of its absolute metric, so
	// that held-out inputs of another scale do not mark every node.
	Relative bool        `json:"relative"`
	Nodes    []GatedNode `json:"nodes"`
	// Best is the node with the best held-out metric among the correct
	// ones ("" when none was): the run's best.
	Best       string   `json:"best,omitempty"`
	BestMetric *float64 `json:"best_metric,omitempty"`
	// SearchBest is the best node of the search, before the gate.
	SearchBest string `json:"search_best,omitempty"`
}

// GatedNode is one node's verdict at the gate.
type GatedNode struct {
	Node string `json:"node"`
	// Roles: "top" (among the search's best), "baseline", or both.
	Roles         []string `json:"roles"`
	SearchMetric  float64  `json:"search_metric"`
	HeldOutMetric *float64 `json:"held_out_metric,omitempty"`
	Verdict       string   `json:"verdict"`
	// Drop is the share by which the node fell below its search standing
	// (its metric, or its speedup over the baseline when Relative): 0.3 is
	// 30% worse; negative when it did better.
	Drop   *float64 `json:"drop,omitempty"`
	Reason string   `json:"reason,omitempty"`
}

// Said is the node's verdict with its reason, as one line says it: the
// reason alone where it says the verdict itself ("incorrect on N=1000 ...",
// the harness's words), else "verdict: reason"; the verdict alone without
// one.
func (n GatedNode) Said() string {
	switch {
	case n.Reason == "":
		return n.Verdict
	case strings.HasPrefix(n.Reason, n.Verdict):
		return n.Reason
	}
	return n.Verdict + ": " + n.Reason
}

// Gated returns the node's verdict at the gate, if it was gated.
func (g *Gate) Gated(node string) (GatedNode, bool) {
	if g == nil {
		return GatedNode{}, false
	}
	for _, n := range g.Nodes {
		if n.Node == node {
			return n, true
		}
	}
	return GatedNode{}, false
}

// ReadGate reads gate.json; ok is false when the run has none (no
// held-out inputs, or the gate has not ended).
func (d Dir) ReadGate() (g Gate, ok bool, err error) {
	ok, err = ReadJSON(d.Path(GateFile), &g)
	return g, ok, err
}
