package hostbound

import (
	"fmt"
	"strconv"

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
	if res.Limits != nil && len(res.Limits.GPUs) > 0 {
		return // a GPU's peak is not part of the bound yet (docs/evaluation.md)
	}
	l, ok := LimitOf(res.HostBound, m)
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
	o.Bound = &rundir.Bound{Host: res.HostBound.Host, Limit: l.Value, Unit: l.Unit, How: l.How, Share: v / l.Value}
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

func num(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }
