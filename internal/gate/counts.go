package gate

import (
	"fmt"
	"strconv"

	"github.com/hpcq/hpcq/internal/tree"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// Counts are what the idea's evaluator made of a run's nodes: the line
// `scheduler run` prints after the search's.
type Counts struct {
	// Nodes the harness judged (a verdict, or a harness that failed).
	Nodes     int
	Correct   int
	Incorrect int
	// SelfReportRejected: nodes whose program reported the run's metric of
	// itself and the harness found wrong, or measured at less than half of
	// its claim (more than twice it, for a metric to minimize).
	SelfReportRejected int
	Overfit            int
	// Gated: the held-out gate ran (Gate is its verdict).
	Gated bool
	Gate  rundir.Gate
}

// Count reads the outcome of every node of the run and the gate's verdict
// (g nil: none).
func Count(dir rundir.Dir, nodes []tree.Node, metric string, maximize bool, g *rundir.Gate) (Counts, error) {
	var c Counts
	if g != nil {
		c.Gated, c.Gate = true, *g
	}
	for _, n := range nodes {
		o, ok, err := dir.ReadOutcome(n.ID)
		if err != nil {
			return c, err
		}
		if !ok || o.Result == nil {
			continue
		}
		r := o.Result
		judged := r.Evaluation.ByHarness() || r.Error != nil && (r.Error.Phase == schema.PhaseEvaluate || r.Error.Phase == schema.PhaseEvaluateQuick)
		if !judged {
			continue
		}
		c.Nodes++
		held, gated := g.Gated(n.ID)
		incorrect := r.Error != nil && r.Error.Kind == schema.ErrKindIncorrect || gated && held.Verdict == rundir.HeldIncorrect
		switch {
		case incorrect:
			c.Incorrect++
		case r.Error == nil:
			c.Correct++
		}
		if gated && held.Verdict == rundir.HeldOverfit {
			c.Overfit++
		}
		if claim, ok := r.Metrics[metric]; ok && (incorrect || o.Metric != nil && overclaims(claim, *o.Metric, maximize)) {
			c.SelfReportRejected++
		}
	}
	return c, nil
}

// overclaims: the program's claim is more than twice as good as what the
// harness measured.
func overclaims(claim, measured float64, maximize bool) bool {
	if maximize {
		return claim > 2*measured
	}
	return claim < measured/2
}

// Line is the counts as `scheduler run` prints them, after the search's
// line; held_out_best is "-" without a gate or a correct gated node.
func (c Counts) Line() string {
	best, metric := "-", "-"
	if c.Gated && c.Gate.Best != "" && c.Gate.BestMetric != nil {
		best, metric = c.Gate.Best, strconv.FormatFloat(*c.Gate.BestMetric, 'g', 6, 64)
	}
	return fmt.Sprintf("evaluation nodes=%d correct=%d incorrect=%d self_report_rejected=%d held_out_best=%s held_out_metric=%s overfit=%d",
		c.Nodes, c.Correct, c.Incorrect, c.SelfReportRejected, best, metric, c.Overfit)
}
