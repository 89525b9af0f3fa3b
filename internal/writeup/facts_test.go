package writeup

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/chdb"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// stencilRows are the results of examples/stencil-cuda's tree as the H200
// ran it (scripts/gpu-check.sh), with a second run beside it that no fact
// may take from.
func stencilRows() results.Rows {
	ts := time.Date(2026, 11, 27, 0, 47, 0, 0, time.UTC)
	f := func(v float64) *float64 { return &v }
	var rows results.Rows
	for _, run := range []string{"r1", "other"} {
		scale := 1.0
		if run == "other" {
			scale = 10
		}
		for _, n := range []struct {
			id, parent, kind string
			stage            int
			gflops, runMS    float64
		}{{"n0001", "", "draft", 1, 816.739, 950}, {"n0002", "n0001", "hyperparam", 2, 842.64, 912}, {"n0003", "n0002", "improve", 3, 840.191, 915},
			{"n0004", "n0003", "ablation", 4, 818.2, 948}} {
			rows.Nodes = append(rows.Nodes, results.Node{Run: run, Node: n.id, Parent: n.parent, Stage: n.stage, Kind: n.kind, Pool: "gpu", Attempt: 1,
				Status: "ok", MetricName: "gflops", MetricValue: f(n.gflops * scale), TS: ts})
			rows.Metrics = append(rows.Metrics, results.Metric{Run: run, Node: n.id, Attempt: 1, Name: "gflops", Value: n.gflops * scale, Unit: "GFLOP/s", TS: ts})
			rows.PhaseRuns = append(rows.PhaseRuns, results.PhaseRun{Run: run, Node: n.id, Attempt: 1, Worker: "w", Phase: "run", Status: "ok",
				DurationMS: n.runMS, Compiler: "nvcc", TS: ts, Nodes: 1})
		}
	}
	// A second attempt of n0001 replaced its first.
	rows.Metrics = append(rows.Metrics, results.Metric{Run: "r1", Node: "n0001", Attempt: 2, Name: "bandwidth_gbs", Value: 3266.9, Unit: "GB/s", TS: ts},
		results.Metric{Run: "r1", Node: "n0001", Attempt: 0, Name: "bandwidth_gbs", Value: 1, Unit: "GB/s", TS: ts})
	return rows
}

// TestFacts: the facts of a run, each with the SQL that gives its value
// (run again here, alone, on the same file).
// stencilDB is a SQLite results file holding the stencil run's rows.
func stencilDB(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "hpcq.sqlite")
	db, err := results.OpenSQLite(path)
	require.NoError(t, err)
	require.NoError(t, db.Write(context.Background(), stencilRows()))
	require.NoError(t, db.Close())
	return path
}

func TestFacts(t *testing.T) {
	path := stencilDB(t)
	checkFacts(t, func(ctx context.Context, sql string) (*results.Table, error) {
		return results.QuerySQLite(ctx, path, sql)
	}, results.DialectSQLite)
}

// TestFactsOnClickHouse: the same facts, and their SQL, on the cluster's
// store (its tables read FINAL).
func TestFactsOnClickHouse(t *testing.T) {
	testutil.RequireBinary(t, "clickhouse-server", "scripts/services.sh install clickhouse")
	ctx := context.Background()
	dsn := testutil.StartService(t, "clickhouse").Env["HPCQ_CLICKHOUSE_DSN"]
	s, err := results.OpenClickHouse(ctx, results.ClickHouseOptions{DSN: dsn, SpoolDir: t.TempDir(), Name: "facts"})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Write(ctx, stencilRows()))
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, s.Flush(fctx))
	conn, err := chdb.Open(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close()
	checkFacts(t, func(ctx context.Context, sql string) (*results.Table, error) {
		return results.QueryClickHouse(ctx, conn, sql)
	},
		results.DialectClickHouse)
}

// TestSelfReportedFacts: with an evaluator, what a program printed of
// itself is stated as its self-report, never as the run's result.
func TestSelfReportedFacts(t *testing.T) {
	path := stencilDB(t)
	q := func(ctx context.Context, sql string) (*results.Table, error) {
		return results.QuerySQLite(ctx, path, sql)
	}
	facts, err := Facts(context.Background(), q, Run{ID: "r1", Metric: "gflops", Unit: "GFLOP/s", Maximize: true, Evaluated: true})
	require.NoError(t, err)
	var self int
	for _, f := range facts {
		if strings.Contains(f.Claim, "reported of itself (self-reported") {
			self++
			require.True(t, strings.HasPrefix(f.SQL, "SELECT value FROM metrics"), f.ID)
		}
		if f.ID == "best" {
			require.NotContains(t, f.Claim, "self-reported", "the run's best is the evaluator's measure")
		}
	}
	require.Positive(t, self)
}

// bySQL runs each fact's SQL alone through q, which must give its value,
// and returns the facts by id.
func bySQL(t *testing.T, q Query, facts []rundir.Fact) map[string]rundir.Fact {
	t.Helper()
	byID := map[string]rundir.Fact{}
	for _, f := range facts {
		byID[f.ID] = f
		tab, err := q(context.Background(), f.SQL)
		require.NoError(t, err, f.SQL)
		require.Len(t, tab.Rows, 1, f.SQL)
		require.InDelta(t, f.Value, number(tab.Rows[0][len(tab.Rows[0])-1]), 1e-9*max(1, f.Value), "%s: %s", f.ID, f.SQL)
	}
	return byID
}

// checkFacts: the facts of the stencil run through q, each fact's SQL run
// alone giving its value, and a paper about them checked.
func checkFacts(t *testing.T, q Query, dialect results.Dialect) {
	facts, err := Facts(context.Background(), q, Run{ID: "r1", Metric: "gflops", Unit: "GFLOP/s", Maximize: true, Dialect: dialect})
	require.NoError(t, err)
	byID := bySQL(t, q, facts)
	require.Equal(t, "n0002", byID["best"].Node)
	require.InDelta(t, 842.64, byID["best"].Value, 1e-9)
	require.InDelta(t, 816.739, byID["best.stage1"].Value, 1e-9)
	require.InDelta(t, 842.64/816.739, byID["best_over_baseline"].Value, 1e-12)
	require.InDelta(t, 842.64-816.739, byID["n0002.delta"].Value, 1e-9, "hyperparameter node against its parent")
	require.InDelta(t, 818.2-840.191, byID["n0004.delta"].Value, 1e-9, "ablation against its parent")
	require.NotContains(t, byID, "n0003.delta", "an improve node is not a delta")
	require.InDelta(t, 3266.9, byID["n0001.bandwidth_gbs"].Value, 1e-9, "the last attempt's value")
	require.InDelta(t, 0.912, byID["n0002.run_s"].Value, 1e-12)
	require.Equal(t, 4.0, byID["nodes"].Value)
	require.Contains(t, byID["best"].Claim, "node n0002 (hyperparam, stage 2 baseline_tuning)")

	// A paper about it: the numbers it may state check; one it invents does not.
	claims := Check(`The best node reached 842.6 GFLOP/s, 3.2\% above the draft's 816.7 and 1.03 times it; `+
		`its run took 0.912 s. We also saw 901.3 GFLOP/s.`, facts, nil)
	var unverified []string
	for _, c := range claims {
		if !c.Verified() {
			unverified = append(unverified, c.Text)
		}
	}
	require.Equal(t, []string{"901.3"}, unverified)

	min, err := Facts(context.Background(), q, Run{ID: "r1", Metric: "gflops", Maximize: false, Dialect: dialect})
	require.NoError(t, err)
	for _, f := range min {
		if f.ID == "best" {
			require.Equal(t, "n0001", f.Node, "minimized: the smallest")
		}
	}
}

// TestHeldOutFacts: after the held-out gate, the run's best is the gate's
// (the search's best, wrong on the held-out inputs, is no best of any
// kind), its held-out metric a fact of its own, and each fact's SQL alone
// gives its value.
func TestHeldOutFacts(t *testing.T) {
	path := stencilDB(t)
	db, err := results.OpenSQLite(path)
	require.NoError(t, err)
	ts := time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC)
	f := func(v float64) *float64 { return &v }
	gated := func(id, parent, kind string, stage int, search float64, verdict string, held *float64) results.Node {
		return results.Node{Run: "r1", Node: id, Parent: parent, Stage: stage, Kind: kind, Pool: "gpu", Attempt: 1, Status: "ok", MetricName: "gflops",
			MetricValue: f(search), TS: ts, MetricFrom: rundir.MetricFromEvaluator, HeldOut: verdict, HeldOutMetric: held}
	}
	require.NoError(t, db.Write(context.Background(), results.Rows{Nodes: []results.Node{
		gated("n0002", "n0001", "hyperparam", 2, 842.64, rundir.HeldIncorrect, nil),
		gated("n0003", "n0002", "improve", 3, 840.191, rundir.HeldHeld, f(830.5)),
		gated("n0001", "", "draft", 1, 816.739, rundir.HeldHeld, f(800)),
	}}))
	require.NoError(t, db.Close())
	q := func(ctx context.Context, sql string) (*results.Table, error) {
		return results.QuerySQLite(ctx, path, sql)
	}
	facts, err := Facts(context.Background(), q, Run{ID: "r1", Metric: "gflops", Unit: "GFLOP/s", Maximize: true, Evaluated: true})
	require.NoError(t, err)
	byID := bySQL(t, q, facts)
	require.Equal(t, "n0003", byID["best"].Node, "the best on the held-out inputs")
	require.InDelta(t, 840.191, byID["best"].Value, 1e-9)
	require.Contains(t, byID["best"].Claim, "the best node on the held-out inputs")
	require.InDelta(t, 830.5, byID["held_out.best"].Value, 1e-9)
	require.InDelta(t, 840.191/816.739, byID["best_over_baseline"].Value, 1e-12)
	require.NotContains(t, byID, "best.stage2", "the only stage-2 node is wrong on the held-out inputs")
	require.Equal(t, 3.0, byID["held_out.gated"].Value)
	require.Equal(t, 1.0, byID["held_out.incorrect"].Value)
	require.Equal(t, 0.0, byID["held_out.overfit"].Value)
	require.InDelta(t, 800, byID["n0001.held_out"].Value, 1e-9)
	require.NotContains(t, byID, "n0002.held_out")
}

// TestFactDefinitions: a tree built to tell the candidates apart. Stage
// 1's best is a debug node (the run's best too), better than both drafts;
// the baseline is the best draft, not it, so the best is 1.5x the
// baseline (the definition by stage gave 1x). Each fact's kind and SQL
// say the same.
func TestFactDefinitions(t *testing.T) {
	ts := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	f := func(v float64) *float64 { return &v }
	var rows results.Rows
	for _, n := range []struct {
		id, parent, kind string
		stage            int
		gflops           float64
	}{{"n0001", "", "draft", 1, 2.0}, {"n0002", "", "draft", 1, 1.0}, {"n0003", "n0002", "debug", 1, 3.0},
		{"n0004", "n0003", "hyperparam", 2, 2.5}, {"n0005", "n0003", "ablation", 4, 1.2}} {
		rows.Nodes = append(rows.Nodes, results.Node{Run: "r1", Node: n.id, Parent: n.parent, Stage: n.stage, Kind: n.kind, Pool: "cpu",
			Attempt: 1, Status: "ok", MetricName: "gflops", MetricValue: f(n.gflops), TS: ts})
	}
	q := rowsQuery(t, rows)
	facts, err := Facts(context.Background(), q, Run{ID: "r1", Metric: "gflops", Unit: "GFLOP/s", Maximize: true})
	require.NoError(t, err)
	byID := bySQL(t, q, facts)
	require.Equal(t, "n0003", byID["best"].Node)
	require.Equal(t, "n0003", byID["best.stage1"].Node, "the stage's best may be a debug node")
	require.InDelta(t, 1.5, byID["best_over_baseline"].Value, 1e-12, "over the best draft, n0001")
	require.Contains(t, byID["best_over_baseline"].Claim, "n0001")
	require.Equal(t, rundir.FactRatio, byID["best_over_baseline"].Kind)
	require.InDelta(t, 0.5, byID["best_gain"].Value, 1e-12)
	require.Equal(t, rundir.FactFraction, byID["best_gain"].Kind)
	require.InDelta(t, -0.5, byID["n0004.delta"].Value, 1e-12, "hyperparam minus its parent")
	require.InDelta(t, -1.8, byID["n0005.delta"].Value, 1e-12)
	require.Equal(t, rundir.FactDelta, byID["n0005.delta"].Kind)
	require.Equal(t, rundir.FactCount, byID["nodes"].Kind)
	require.Equal(t, 5.0, byID["nodes"].Value)
	for _, f := range facts {
		require.NotEmpty(t, f.Kind, f.ID)
	}
	// The paper the cluster run wrote: "1 times the baseline (0.0% above
	// it)" is false now; 1.5x and 50% above it are true.
	for tex, ok := range map[string]bool{`1 times the baseline`: false, `0.0\% above it`: false, `1.5x the baseline`: true, `50\% above it`: true} {
		cs := Check(tex, facts, nil)
		require.Len(t, cs, 1, tex)
		require.Equal(t, ok, cs[0].Verified(), tex)
	}
}

// TestNoiseFacts: the best's spread is a fact; a difference whose two
// intervals overlap is inside the noise, and a paper stating it (by a
// literal or \fact) is told so; one beyond the noise is not.
func TestNoiseFacts(t *testing.T) {
	ts := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	f := func(v float64) *float64 { return &v }
	var rows results.Rows
	for _, n := range []struct {
		id, parent, kind string
		stage            int
		m, low, high     float64
	}{{"n0001", "", "draft", 1, 2.0, 1.8, 2.3}, {"n0002", "n0001", "improve", 3, 2.1, 1.9, 2.4}, {"n0003", "n0002", "ablation", 4, 1.0, 0.9, 1.1}} {
		row := results.Node{Run: "r1", Node: n.id, Parent: n.parent, Stage: n.stage, Kind: n.kind, Pool: "cpu", Attempt: 1, Status: "ok",
			MetricName: "gflops", MetricValue: f(n.m), TS: ts}
		row.SetSpread(&schema.Spread{Q1: n.m - 0.05, Q3: n.m + 0.05, Low: n.low, High: n.high, N: 5})
		row.SetBound(&rundir.Bound{Host: "h", Limit: 84, Unit: "GFLOP/s"})
		rows.Nodes = append(rows.Nodes, row)
	}
	q := rowsQuery(t, rows)
	facts, err := Facts(context.Background(), q, Run{ID: "r1", Metric: "gflops", Unit: "GFLOP/s", Maximize: true})
	require.NoError(t, err)
	byID := bySQL(t, q, facts)
	require.InDelta(t, 1.9, byID["best.low"].Value, 1e-12)
	require.InDelta(t, 2.4, byID["best.high"].Value, 1e-12)
	require.InDelta(t, 2.15, byID["best.q3"].Value, 1e-12)
	require.Equal(t, 84.0, byID["best.bound"].Value)
	require.InDelta(t, 2.1/84, byID["best.bound_share"].Value, 1e-12, "the best's share of its host's peak")
	require.Equal(t, "best.bound_share", Check(`2.5\% of the host's peak`, facts, nil)[0].FactID)
	require.Equal(t, "inside the noise: n0002's 95% interval [1.9, 2.4] overlaps n0001's [1.8, 2.3]", byID["best_over_baseline"].Noise)
	require.NotEmpty(t, byID["best_gain"].Noise)
	require.Empty(t, byID["n0003.delta"].Noise, "the ablation's drop is beyond the noise")

	r := CheckPaper(`The tuned kernel was 1.05x faster than the draft; removing the blocking lost 1.1 GFLOP/s.`, nil, facts, nil)
	require.Zero(t, r.Unverified)
	require.Len(t, r.InsideNoise, 1)
	require.Contains(t, r.InsideNoise[0], "best_over_baseline (1.05 in ")
	r = CheckPaper(`A gain of \factpct{best_gain}.`, nil, facts, nil)
	require.Len(t, r.InsideNoise, 1)
	require.Contains(t, r.InsideNoise[0], `best_gain (\fact{best_gain}): inside the noise`)
	r = CheckPaper(`A gain of \factpct{best_gain}, within the noise of the measurements; 1.05x faster, which their intervals' overlap leaves open.`, nil, facts, nil)
	require.Empty(t, r.InsideNoise, "said to be inside the noise: told")
	require.Contains(t, factsText(facts), "not a difference the measurements tell apart")
}

// rowsQuery is a Query on a SQLite results file holding rows.
func rowsQuery(t *testing.T, rows results.Rows) Query {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hpcq.sqlite")
	db, err := results.OpenSQLite(path)
	require.NoError(t, err)
	require.NoError(t, db.Write(context.Background(), rows))
	require.NoError(t, db.Close())
	return func(ctx context.Context, sql string) (*results.Table, error) {
		return results.QuerySQLite(ctx, path, sql)
	}
}
