package writeup

import (
	"context"
	"fmt"
	"math"
	"regexp"

	"github.com/hpcq/hpcq/pkg/rundir"
)

// spread is a node's metric's noise as its nodes row holds it: quartiles
// and the 95% bootstrap interval of repeated measurements.
type spread struct{ q1, q3, low, high float64 }

// spreads are the run's nodes' spreads (none from a results file written
// before the nodes rows had them, or for nodes measured once).
func spreads(ctx context.Context, q Query, final, run string) map[string]spread {
	t, err := q(ctx, "SELECT node, metric_q1, metric_q3, metric_low, metric_high FROM nodes"+final+" WHERE run = "+run+
		" AND metric_low IS NOT NULL ORDER BY node")
	out := map[string]spread{}
	if err != nil {
		return out
	}
	for _, row := range t.Rows {
		s := spread{number(row[1]), number(row[2]), number(row[3]), number(row[4])}
		if !math.IsNaN(s.low) && !math.IsNaN(s.high) {
			out[fmt.Sprint(row[0])] = s
		}
	}
	return out
}

// insideNoise says why a difference between nodes a and b is inside the
// noise (their 95% intervals overlap), or "" when it is not, or when one
// was not measured with repeats.
func insideNoise(sp map[string]spread, a, b string) string {
	x, okA := sp[a]
	y, okB := sp[b]
	if !okA || !okB || a == b || x.low > y.high || y.low > x.high {
		return ""
	}
	return fmt.Sprintf("inside the noise: %s's 95%% interval [%s, %s] overlaps %s's [%s, %s]", a, Format(x.low), Format(x.high),
		b, Format(y.low), Format(y.high))
}

// spreadFacts are the noise of the run's best as facts: its quartiles
// and 95% interval, in the metric's unit.
func spreadFacts(sp map[string]spread, id string, r Run, final, run string) []rundir.Fact {
	s, ok := sp[id]
	if !ok {
		return nil
	}
	col := func(c string) string {
		return "SELECT " + c + " FROM nodes" + final + " WHERE run = " + run + " AND node = " + quote(id)
	}
	return []rundir.Fact{
		{ID: "best.q1", Claim: fmt.Sprintf("first quartile of the repeated measurements of the run's best (%s)", id), Value: s.q1, Unit: r.Unit,
			Kind: rundir.FactMetric, Node: id, SQL: col("metric_q1")},
		{ID: "best.q3", Claim: fmt.Sprintf("third quartile of the repeated measurements of the run's best (%s)", id), Value: s.q3, Unit: r.Unit,
			Kind: rundir.FactMetric, Node: id, SQL: col("metric_q3")},
		{ID: "best.low", Claim: fmt.Sprintf("lower bound of the 95%% bootstrap interval of the run's best's %s (%s)", r.Metric, id), Value: s.low,
			Unit: r.Unit, Kind: rundir.FactMetric, Node: id, SQL: col("metric_low")},
		{ID: "best.high", Claim: fmt.Sprintf("upper bound of the 95%% bootstrap interval of the run's best's %s (%s)", r.Metric, id), Value: s.high,
			Unit: r.Unit, Kind: rundir.FactMetric, Node: id, SQL: col("metric_high")},
	}
}

// noiseFindings are the differences inside the noise a paper states, by
// a literal that verified against such a fact or by \fact, without saying
// so where it states them (acknowledged: "within the noise", "not
// distinguishable", "overlap", ...).
func noiseFindings(tex string, r rundir.Report, byID map[string]rundir.Fact) []string {
	var out []string
	seen := map[string]bool{}
	note := func(id, how, context string) {
		if f, ok := byID[id]; ok && f.Noise != "" && !seen[id] && !acknowledgedRe.MatchString(context) {
			seen[id] = true
			out = append(out, fmt.Sprintf("%s (%s): %s", id, how, f.Noise))
		}
	}
	for _, c := range r.Claims {
		if c.FactID != "" {
			note(c.FactID, fmt.Sprintf("%s in %q", c.Shown(), c.Context), c.Context)
		}
	}
	for _, f := range r.Stated {
		for _, loc := range regexp.MustCompile(`\\fact(?:pct)?\s*\{\s*`+regexp.QuoteMeta(f.ID)+`\s*\}`).FindAllStringIndex(tex, -1) {
			note(f.ID, `\fact{`+f.ID+`}`, around(tex, loc[0], loc[1]-loc[0]))
		}
	}
	return out
}

// acknowledgedRe: the sentence says the difference is not told apart.
var acknowledgedRe = regexp.MustCompile(`(?i)noise|not (?:statistically )?(?:significant|distinguishable)|indistinguishable|overlap|within (?:the )?(?:measurement |run-to-run )?(?:error|variation|variance|spread)`)

// boundFacts are the run's best set against its host's bound
// (docs/evaluation.md): the bound in the metric's unit, and the best's
// share of it. None from a results file written before the nodes rows had
// the bound, or for a metric without one.
func boundFacts(ctx context.Context, q Query, id string, r Run, final, run string) []rundir.Fact {
	where := " FROM nodes" + final + " WHERE run = " + run + " AND node = " + quote(id)
	t, err := q(ctx, "SELECT metric_value, metric_bound"+where)
	if err != nil || len(t.Rows) != 1 {
		return nil
	}
	v, bound := number(t.Rows[0][0]), number(t.Rows[0][1])
	if math.IsNaN(v) || math.IsNaN(bound) || bound <= 0 {
		return nil
	}
	return []rundir.Fact{
		{ID: "best.bound", Claim: fmt.Sprintf("the most %s the host that measured the run's best (%s) can reach: its peak or memory bound", r.Metric, id),
			Value: bound, Unit: r.Unit, Kind: rundir.FactMetric, Node: id, SQL: "SELECT metric_bound" + where},
		{ID: "best.bound_share", Claim: fmt.Sprintf("the run's best's %s as a share of its host's bound (%s)", r.Metric, id),
			Value: v / bound, Kind: rundir.FactFraction, Node: id, SQL: "SELECT metric_value / metric_bound" + where},
	}
}
