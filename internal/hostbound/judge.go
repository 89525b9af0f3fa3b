package hostbound

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// Judge sets the metric of o (named name) against what the host that
// measured it can do (res.HostBound; m from run.yaml metric.bound): its
// share of the limit, or, beyond it, the node buggy and impossible, with
// both numbers in the reason and the claim kept out of every ranking
// (docs/evaluation.md). The engine judges every node, the gate every
// held-out answer.
func Judge(o *rundir.Outcome, res *schema.NodeResult, name string, m Metric) {
	if o.Metric == nil || o.Buggy || res == nil {
		return
	}
	b := res.HostBound
	if res.Limits != nil && len(res.Limits.GPUs) > 0 {
		// A task given GPUs: bounded by their published peaks besides the
		// CPUs', for a FLOP/s metric, when every model is known.
		var ok bool
		if b, ok = withGPUs(b, len(res.Limits.GPUs)); !ok || (m.Bound != BoundAuto && m.Bound != BoundFlops) {
			return
		}
	}
	l, ok := LimitOf(b, m)
	if !ok || !(l.Value > 0) {
		return
	}
	if n := res.Limits; n != nil && n.Nodes > 1 {
		// A multi-node run's ranks spanned that many hosts of the
		// allocation, taken alike.
		l.Value *= float64(n.Nodes)
		l.How += fmt.Sprintf(", x %d hosts", n.Nodes)
	}
	v := *o.Metric
	o.Bound = &rundir.Bound{Host: b.Host, Limit: l.Value, Unit: l.Unit, How: l.How, Share: v / l.Value}
	if v <= l.Value {
		return
	}
	who := "the program's own report"
	if o.MetricFrom == rundir.MetricFromEvaluator {
		who = "as the harness measured it"
	}
	o.Bound.Impossible, o.Bound.Claimed = true, &v
	o.Buggy, o.Metric, o.Spread = true, nil, nil
	o.Reason = fmt.Sprintf("impossible: %s = %s %s (%s) is %.3gx what host %s can do at most, %s %s (%s)", name, num(v), m.Unit, who,
		v/l.Value, o.Bound.Host, num(l.Value), l.Unit, l.How)
}

// withGPUs is b with its GPUs' published peaks added to its CPUs' (n: the
// GPUs the task was given); ok false when b says less than n GPUs or one's
// model has no published figure hpcq knows.
func withGPUs(b *schema.HostBound, n int) (*schema.HostBound, bool) {
	if b == nil || len(b.GPUs) < n {
		return nil, false
	}
	c := *b
	var hows []string
	for _, g := range b.GPUs {
		if g.PeakTFLOPS <= 0 {
			return nil, false
		}
		c.PeakGFLOPS += 1000 * g.PeakTFLOPS
		hows = append(hows, fmt.Sprintf("%s %g TFLOP/s (%s)", g.ID, g.PeakTFLOPS, g.How))
	}
	c.PeakHow += " + GPU " + strings.Join(hows, " + GPU ")
	return &c, true
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }
