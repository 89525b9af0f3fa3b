// Package writeup turns a finished search into a paper whose numbers are
// checked: the facts a paper may state come first, from the results tables
// (each with its id and the SQL that produced it); every numeric literal
// the model writes is then matched to one of them, within the rounding it
// shows, or to a short whitelist.
package writeup

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// Query runs one read statement on the run's results store (SQLite or
// ClickHouse: results.QuerySQLite, results.QueryClickHouse).
type Query func(ctx context.Context, sql string) (*results.Table, error)

// Run says which run's facts to gather and how its metric is judged.
type Run struct {
	ID       string
	Metric   string
	Unit     string
	Maximize bool
	// Dialect of the store: ClickHouse's tables are read FINAL (their
	// rows are replaced, not updated).
	Dialect results.Dialect
	// Evaluated: the idea's evaluator measured the nodes' metric (the
	// nodes table's value); what a program printed of itself (the metrics
	// table) is then a self-report, and its facts say so.
	Evaluated bool
}

// Facts are the run's numbers a paper may state: every metric of every node
// (its last attempt), the best node of each stage and of the run, the
// baseline (the best draft), the best over the baseline, each hyperparameter
// and ablation node's change from its parent, each node's run time, and the
// counts of nodes. Each fact's SQL alone gives its value.
//
// Long: one block per kind of fact, each a query and the facts it gives.
func Facts(ctx context.Context, q Query, r Run) ([]rundir.Fact, error) {
	final := ""
	if r.Dialect == results.DialectClickHouse {
		final = " FINAL"
	}
	run := quote(r.ID)
	nodes, gateCols, err := nodeRows(ctx, q, final, run)
	if err != nil {
		return nil, err
	}
	byID := map[string]node{}
	var ids []string
	for _, row := range nodes.Rows {
		id := fmt.Sprint(row[0])
		n := node{stage: int(number(row[1])), kind: fmt.Sprint(row[2]), parent: fmt.Sprint(row[3])}
		if v := number(row[4]); !math.IsNaN(v) {
			n.metric = &v
		}
		if gateCols {
			n.heldOut = fmt.Sprint(row[5])
			if v := number(row[6]); !math.IsNaN(v) {
				n.heldMetric = &v
			}
		}
		byID[id] = n
		ids = append(ids, id)
	}
	var facts []rundir.Fact
	add := func(f rundir.Fact) {
		if !math.IsNaN(f.Value) && !math.IsInf(f.Value, 0) {
			facts = append(facts, f)
		}
	}
	describe := func(id string) string {
		n := byID[id]
		return fmt.Sprintf("node %s (%s, stage %d %s)", id, n.kind, n.stage, schema.StageName(n.stage))
	}

	order := "DESC"
	if !r.Maximize {
		order = "ASC"
	}
	// A node the held-out gate found wrong is never a best: its program is
	// wrong on inputs the search did not try.
	correct := ""
	if gateCols {
		correct = " AND held_out <> " + quote(rundir.HeldIncorrect)
	}
	best := func(where string) string {
		return "SELECT node, metric_value FROM nodes" + final + " WHERE run = " + run + where + correct +
			" AND metric_value IS NOT NULL ORDER BY metric_value " + order + ", node LIMIT 1"
	}
	pickWhere := func(stage int, kind string) (string, float64, bool) {
		id, v, ok := "", 0.0, false
		for _, i := range ids {
			n := byID[i]
			if n.metric == nil || stage > 0 && n.stage != stage || kind != "" && n.kind != kind || n.heldOut == rundir.HeldIncorrect {
				continue
			}
			if !ok || r.Maximize && *n.metric > v || !r.Maximize && *n.metric < v {
				id, v, ok = i, *n.metric, true
			}
		}
		return id, v, ok
	}
	pick := func(stage int) (string, float64, bool) { return pickWhere(stage, "") }
	for stage := 1; stage <= 4; stage++ {
		if id, v, ok := pick(stage); ok {
			add(rundir.Fact{ID: fmt.Sprintf("best.stage%d", stage), Claim: fmt.Sprintf("best %s of stage %d (%s): %s", r.Metric, stage,
				schema.StageName(stage), describe(id)), Value: v, Unit: r.Unit, Kind: rundir.FactMetric, Node: id, SQL: best(fmt.Sprintf(" AND stage = %d", stage))})
		}
	}
	bestID, bestV, okBest := pick(0)
	// The baseline is the best draft: a node the model wrote from the idea
	// alone, not a debug node of stage 1 (it may be the run's best).
	baseID, baseV, okBase := pickWhere(1, "draft")
	baseSQL := best(" AND stage = 1 AND kind = 'draft'")
	if !okBase {
		baseID, baseV, okBase = pick(1)
		baseSQL = best(" AND stage = 1")
	}
	bestSQL, bestClaim := best(""), fmt.Sprintf("best %s of the run: %s", r.Metric, describe(bestID))
	held := heldOutNodes(byID, ids, r.Maximize)
	if held.best != "" {
		// The gate chose the run's best on the held-out inputs: its number
		// here is its search metric, the held-out one is held_out.best.
		bestID, bestV, okBest = held.best, *byID[held.best].metric, true
		bestSQL = "SELECT node, metric_value FROM nodes" + final + " WHERE run = " + run + " AND held_out IN ('held', 'overfit')" +
			" AND held_out_metric IS NOT NULL ORDER BY held_out_metric " + order + ", node LIMIT 1"
		bestClaim = fmt.Sprintf("%s of the run's best, the best node on the held-out inputs, on the search's inputs: %s", r.Metric, describe(bestID))
	}
	if okBest {
		add(rundir.Fact{ID: "best", Claim: bestClaim, Value: bestV, Unit: r.Unit, Kind: rundir.FactMetric, Node: bestID, SQL: bestSQL})
	}
	sp := spreads(ctx, q, final, run)
	for _, f := range spreadFacts(sp, bestID, r, final, run) {
		add(f)
	}
	if okBest {
		for _, f := range boundFacts(ctx, q, bestID, r, final, run) {
			add(f)
		}
	}
	if okBest && okBase && baseV != 0 {
		noise := insideNoise(sp, bestID, baseID)
		add(rundir.Fact{ID: "best_over_baseline", Noise: noise, Claim: fmt.Sprintf("the best node's %s over the baseline's (the best draft, %s)", r.Metric, baseID),
			Value: bestV / baseV, Kind: rundir.FactRatio, Node: bestID,
			SQL: "SELECT (" + scalar(bestSQL) + ") / (" + scalar(baseSQL) + ")"})
		add(rundir.Fact{ID: "best_gain", Noise: noise, Claim: fmt.Sprintf("the best node's %s above the baseline's, as a fraction of it (the best draft, %s)", r.Metric, baseID),
			Value: bestV/baseV - 1, Kind: rundir.FactFraction, Node: bestID,
			SQL: "SELECT (" + scalar(bestSQL) + ") / (" + scalar(baseSQL) + ") - 1"})
	}
	for _, f := range heldOutFacts(held, byID, r, final, run, describe) {
		add(f)
	}
	// Scalar subqueries, not a join: ClickHouse reads FINAL tables in a join
	// only with aliases its older versions refuse.
	metricOf := func(id string) string {
		return "SELECT metric_value FROM nodes" + final + " WHERE run = " + run + " AND node = " + quote(id)
	}
	for _, id := range ids {
		if m := byID[id].metric; m != nil {
			add(rundir.Fact{ID: id + ".value", Claim: fmt.Sprintf("%s of %s as the search ranked it", r.Metric, describe(id)), Value: *m, Unit: r.Unit,
				Kind: rundir.FactMetric, Node: id, SQL: metricOf(id)})
		}
	}
	for _, id := range ids {
		n := byID[id]
		p, ok := byID[n.parent]
		if (n.kind != "hyperparam" && n.kind != "ablation") || !ok || n.metric == nil || p.metric == nil {
			continue
		}
		add(rundir.Fact{ID: id + ".delta", Noise: insideNoise(sp, id, n.parent), Claim: fmt.Sprintf("%s of %s minus its parent %s's", r.Metric, describe(id), n.parent),
			Value: *n.metric - *p.metric, Unit: r.Unit, Kind: rundir.FactDelta, Node: id,
			SQL: "SELECT (" + metricOf(id) + ") - (" + metricOf(n.parent) + ")"})
	}

	metrics, err := q(ctx, "SELECT node, name, value, unit, attempt FROM metrics"+final+" WHERE run = "+run+" ORDER BY node, name, attempt")
	if err != nil {
		return nil, fmt.Errorf("writeup: the run's metrics: %w", err)
	}
	last := map[[2]string]rundir.Fact{} // the last attempt's value wins
	reported := "%s reported by %s"
	if r.Evaluated {
		reported = "%s that the program of %s reported of itself (self-reported: the evaluator did not measure it)"
	}
	for _, row := range metrics.Rows {
		id, name := fmt.Sprint(row[0]), fmt.Sprint(row[1])
		last[[2]string{id, name}] = rundir.Fact{ID: id + "." + name, Claim: fmt.Sprintf(reported, name, describe(id)),
			Value: number(row[2]), Unit: fmt.Sprint(row[3]), Kind: rundir.FactMetric, Node: id,
			SQL: "SELECT value FROM metrics" + final + " WHERE run = " + run + " AND node = " + quote(id) + " AND name = " + quote(name) +
				" ORDER BY attempt DESC LIMIT 1"}
	}
	durations, err := q(ctx, "SELECT node, duration_ms, attempt FROM phase_runs"+final+" WHERE run = "+run+" AND phase = 'run' ORDER BY node, attempt")
	if err != nil {
		return nil, fmt.Errorf("writeup: the run's phase runs: %w", err)
	}
	for _, row := range durations.Rows {
		id := fmt.Sprint(row[0])
		last[[2]string{id, "run_s"}] = rundir.Fact{ID: id + ".run_s", Claim: "seconds the run phase of " + describe(id) + " took",
			Value: number(row[1]) / 1000, Unit: "s", Kind: rundir.FactSeconds, Node: id,
			SQL: "SELECT duration_ms / 1000.0 FROM phase_runs" + final + " WHERE run = " + run + " AND node = " + quote(id) +
				" AND phase = 'run' ORDER BY attempt DESC LIMIT 1"}
	}
	keys := make([][2]string, 0, len(last))
	for k := range last {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i][0] < keys[j][0] || keys[i][0] == keys[j][0] && keys[i][1] < keys[j][1]
	})
	for _, k := range keys {
		add(last[k])
	}

	ok := 0
	for _, id := range ids {
		if byID[id].metric != nil {
			ok++
		}
	}
	add(rundir.Fact{ID: "nodes", Claim: "nodes the search grew", Value: float64(len(ids)), Kind: rundir.FactCount,
		SQL: "SELECT count(*) FROM nodes" + final + " WHERE run = " + run})
	add(rundir.Fact{ID: "nodes_with_metric", Claim: "nodes that produced " + r.Metric, Value: float64(ok), Kind: rundir.FactCount,
		SQL: "SELECT count(*) FROM nodes" + final + " WHERE run = " + run + " AND metric_value IS NOT NULL"})
	return facts, nil
}

// scalar is a query that gives its second column: best's value.
func scalar(q string) string {
	return strings.Replace(q, "SELECT node, metric_value", "SELECT metric_value", 1)
}

// quote is s as an SQL string literal.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// number reads a column value as a float (NaN when it is none: NULL, read
// by SQLite as nil and by ClickHouse's Nullable columns as a nil pointer).
func number(v any) float64 {
	switch x := v.(type) {
	case *float64:
		if x != nil {
			return *x
		}
	case float64:
		return x
	case float32:
		return float64(x)
	case int64:
		return float64(x)
	case int:
		return float64(x)
	case uint32:
		return float64(x)
	case uint64:
		return float64(x)
	case int32:
		return float64(x)
	case []byte:
		f, err := strconv.ParseFloat(string(x), 64)
		if err == nil {
			return f
		}
	case string:
		f, err := strconv.ParseFloat(x, 64)
		if err == nil {
			return f
		}
	}
	return math.NaN()
}
