// Package resultstest is the conformance suite every results store passes:
// the tables the engine and the workers write, idempotent writes, the
// latest state of a run winning, and the example queries of
// docs/results.md. It runs against SQLite and against a real ClickHouse.
package resultstest

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// Store is a results store under test.
type Store struct {
	Sink    results.Sink
	Dialect results.Dialect
	// Query runs a read statement on the store (results.QuerySQLite or
	// QueryClickHouse).
	Query func(ctx context.Context, q string) (*results.Table, error)
	// Flush, when set, waits until the writes so far can be read.
	Flush func(ctx context.Context) error
}

// T0 is the time of the sample rows.
var T0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// Sample is a run with two nodes: one compiled with gcc and ran, one whose
// compile failed with mpicc; and one LLM call. The first brought home its
// compile log and a plot.
func Sample(run string) results.Rows {
	ok := schema.NodeTask{RunID: run, NodeID: "n1", Attempt: 1, Pool: "cpu", Stage: 1, Kind: "draft",
		Artifacts: schema.Artifacts{Compile: schema.CommandsPhase{Commands: []string{"OMP=1 /usr/bin/gcc -O3 -fopenmp -o s s.c"}},
			Run: schema.RunPhase{MetricPatterns: []schema.MetricPattern{{Name: "gflops", Regex: "GFLOPS: (.*)"}}}}}
	okRes := schema.NodeResult{RunID: run, NodeID: "n1", Attempt: 1, Worker: "w1", Started: T0, DurationMS: 1500,
		Phases: []schema.PhaseResult{
			{Name: "compile", OK: true, Started: T0, DurationMS: 500},
			{Name: "run", OK: true, Started: T0.Add(500 * time.Millisecond), DurationMS: 1000}},
		Metrics: map[string]float64{"gflops": 12.5, "time_s": 0.75}, MetricUnits: map[string]string{"gflops": "GFLOP/s"},
		Artifacts: []schema.Artifact{
			{Kind: schema.ArtifactLog, Name: "compile.log", Bytes: 120, SHA256: strings.Repeat("a", 64)},
			{Kind: schema.ArtifactPlot, Name: "plots/gflops.svg", Bytes: 2048, SHA256: strings.Repeat("b", 64)}}}
	bad := schema.NodeTask{RunID: run, NodeID: "n2", ParentID: "n1", Attempt: 1, Pool: "cpu", Stage: 1, Kind: "debug",
		Artifacts: schema.Artifacts{Compile: schema.CommandsPhase{Commands: []string{"mpicc -o pi pi.c"}}}}
	badRes := schema.NodeResult{RunID: run, NodeID: "n2", Attempt: 1, Worker: "w2", Started: T0.Add(time.Minute), DurationMS: 200,
		Phases: []schema.PhaseResult{{Name: "compile", OK: false, ExitCode: 1, Started: T0.Add(time.Minute), DurationMS: 200}},
		Error:  &schema.ResultError{Phase: "compile", Kind: schema.ErrKindCompileFailed, Message: "pi.c:3: error"}}
	rows := results.Rows{Runs: []results.Run{{Run: run, Status: "running", Title: "stencil", Mode: "local", Config: "{}", TS: T0}}}
	for _, r := range []struct {
		t *schema.NodeTask
		r *schema.NodeResult
	}{{&ok, &okRes}, {&bad, &badRes}} {
		status, kind := (&rundir.Outcome{Result: r.r}).StatusOf()
		rows.Nodes = append(rows.Nodes, results.NodeRow(r.t, r.r, status, kind))
		r := results.AttemptRows(r.t, r.r)
		rows.PhaseRuns = append(rows.PhaseRuns, r.PhaseRuns...)
		rows.Metrics = append(rows.Metrics, r.Metrics...)
		rows.Artifacts = append(rows.Artifacts, r.Artifacts...)
	}
	rows.LLMCalls = []results.LLMCall{{Run: run, Node: "n1", CallID: "c1", Purpose: "draft", Model: "gpt-x", TokensIn: 1200, TokensOut: 300,
		ReasoningTokens: 240, CachedTokens: 1024, TokensEstimated: true, LatencyMS: 850, CostUSD: 0.0042, TS: T0, FinishReason: "length"}}
	return rows
}

// Evaluated is a run with one node the idea's evaluator measured: a
// warm-up and three repeats of one input, the metric their median with its
// spread; the program said 5000 of itself.
func Evaluated(run string) results.Rows {
	t := schema.NodeTask{RunID: run, NodeID: "e1", Attempt: 1, Pool: "cpu", Stage: 1, Kind: "draft"}
	f := func(v float64) *float64 { return &v }
	var samples []schema.EvalSample
	for i, v := range []float64{9, 10, 11, 10.5} {
		samples = append(samples, schema.EvalSample{Input: "N=1000", Repeat: i, Correct: true, Metric: f(v), Unit: "GFLOP/s"})
	}
	r := schema.NodeResult{RunID: run, NodeID: "e1", Attempt: 1, Worker: "w1", Host: "h1", Started: T0, DurationMS: 900,
		Phases:  []schema.PhaseResult{{Name: schema.PhaseEvaluate, OK: true, Started: T0, DurationMS: 900}},
		Metrics: map[string]float64{"gflops": 5000},
		Evaluation: &schema.Evaluation{Stage: schema.EvalSearch, Samples: samples, Correct: true, Metric: f(10.5), Unit: "GFLOP/s",
			Spread: &schema.Spread{Q1: 10.25, Q3: 10.75, Low: 10, High: 11, N: 3}}}
	rows := results.AttemptRows(&t, &r)
	rows.Nodes = []results.Node{results.NodeRow(&t, &r, schema.NodeOK, "")}
	rows.Nodes[0].SetBound(&rundir.Bound{Host: "h1", Limit: 249.2, Unit: "GFLOP/s", Share: 10.5 / 249.2})
	return rows
}

// DocQueries are the example queries of docs/results.md, per dialect: each
// must run and answer rows on the sample run.
var DocQueries = map[results.Dialect][]string{
	results.DialectClickHouse: {
		`SELECT run, argMax(node, metric_value) AS best_node, max(metric_value) AS best, any(metric_name) AS metric
FROM nodes FINAL WHERE status = 'ok' AND metric_name <> ''
GROUP BY run ORDER BY run`,
		`SELECT compiler, count() AS compiles, countIf(status = 'failed') / count() AS failure_rate
FROM phase_runs FINAL WHERE phase = 'compile' GROUP BY compiler ORDER BY failure_rate DESC`,
		`SELECT stage, ts, node, value FROM metrics
ALL INNER JOIN (SELECT run, node, stage FROM nodes FINAL) USING (run, node)
WHERE name = 'gflops' ORDER BY stage, ts`,
		`SELECT node, sum(tokens_in) AS tokens_in, sum(tokens_out) AS tokens_out, sum(cost_usd) AS cost_usd
FROM llm_calls GROUP BY node ORDER BY cost_usd DESC`,
		`SELECT phase, count() AS runs, avg(duration_ms) AS avg_ms, max(duration_ms) AS max_ms
FROM phase_runs GROUP BY phase`,
	},
	results.DialectSQLite: {
		`SELECT node, metric_name, metric_value FROM nodes
WHERE status = 'ok' AND metric_name <> '' ORDER BY metric_value DESC LIMIT 1`,
		`SELECT compiler, COUNT(*) AS compiles, AVG(status = 'failed') AS failure_rate
FROM phase_runs WHERE phase = 'compile' GROUP BY compiler ORDER BY failure_rate DESC`,
		`SELECT n.stage, m.ts, m.node, m.value
FROM metrics AS m JOIN nodes AS n ON n.run = m.run AND n.node = m.node
WHERE m.name = 'gflops' ORDER BY n.stage, m.ts`,
		`SELECT node, sum(tokens_in) AS tokens_in, sum(tokens_out) AS tokens_out, sum(cost_usd) AS cost_usd
FROM llm_calls GROUP BY node ORDER BY cost_usd DESC`,
		`SELECT phase, COUNT(*) AS runs, avg(duration_ms) AS avg_ms, max(duration_ms) AS max_ms
FROM phase_runs GROUP BY phase`,
	},
}

// Exercise runs the suite; open returns a fresh, empty store for each case.
//
// Long: the conformance suite's scenarios in order, each a few assertions.
func Exercise(t *testing.T, open func(t *testing.T) Store) {
	ctx := context.Background()
	setup := func(t *testing.T) (Store, func(q string, args ...any) [][]any) {
		s := open(t)
		query := func(q string, args ...any) [][]any {
			t.Helper()
			if s.Flush != nil {
				fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				require.NoError(t, s.Flush(fctx))
			}
			tab, err := s.Query(ctx, fmt.Sprintf(q, args...))
			require.NoError(t, err, q)
			return tab.Rows
		}
		return s, query
	}
	// final is the table as of its latest rows (ClickHouse folds copies
	// when asked).
	final := func(s Store, table string) string {
		if s.Dialect == results.DialectClickHouse {
			return table + " FINAL"
		}
		return table
	}
	count := func(t *testing.T, s Store, query func(string, ...any) [][]any, table, run string) string {
		t.Helper()
		return fmt.Sprint(query("SELECT count(*) FROM %s WHERE run = '%s'", final(s, table), run)[0][0])
	}

	t.Run("EveryTable", func(t *testing.T) {
		s, query := setup(t)
		require.NoError(t, s.Sink.Write(ctx, Sample("r1")))
		want := map[string]string{"runs": "1", "nodes": "2", "phase_runs": "3", "metrics": "2", "llm_calls": "1", "artifacts": "2", "samples": "0"}
		for _, table := range results.Tables {
			require.Equal(t, want[table], count(t, s, query, table, "r1"), table)
		}
		rows := query("SELECT node, status, metric_name, metric_value FROM %s WHERE run = 'r1' ORDER BY node", final(s, "nodes"))
		require.Len(t, rows, 2)
		require.Equal(t, []string{"n1", "ok", "gflops", "12.5"}, strs(rows[0]))
		require.Equal(t, []string{"n2", "failed"}, strs(rows[1])[:2])
		require.Equal(t, [][]string{{"n2"}}, strsAll(query("SELECT node FROM %s WHERE run = 'r1' AND metric_value IS NULL", final(s, "nodes"))),
			"a failed node's metric is NULL, not 0")
		rows = query("SELECT compiler, status, error_kind FROM %s WHERE run = 'r1' AND phase = 'compile' ORDER BY node", final(s, "phase_runs"))
		require.Equal(t, [][]string{{"gcc", "ok", ""}, {"mpicc", "failed", schema.ErrKindCompileFailed}}, strsAll(rows))
		rows = query("SELECT name, value, unit FROM %s WHERE run = 'r1' ORDER BY name", final(s, "metrics"))
		require.Equal(t, [][]string{{"gflops", "12.5", "GFLOP/s"}, {"time_s", "0.75", ""}}, strsAll(rows))
		rows = query("SELECT purpose, tokens_in + tokens_out, reasoning_tokens, cached_tokens, tokens_estimated, finish_reason, unpriced FROM %s "+
			"WHERE run = 'r1' ORDER BY call_id", final(s, "llm_calls"))
		require.Equal(t, [][]string{{"draft", "1500", "240", "1024", "1", "length", "0"}}, strsAll(rows))
		rows = query("SELECT node, kind, path, bytes FROM %s WHERE run = 'r1' ORDER BY path", final(s, "artifacts"))
		require.Equal(t, [][]string{{"n1", "log", "nodes/n1/logs/compile.log", "120"}, {"n1", "plot", "nodes/n1/outputs/plots/gflops.svg", "2048"}}, strsAll(rows))
	})

	t.Run("WritesAreIdempotent", func(t *testing.T) {
		s, query := setup(t)
		for range 3 {
			require.NoError(t, s.Sink.Write(ctx, Sample("r2")))
		}
		want := map[string]string{"runs": "1", "nodes": "2", "phase_runs": "3", "metrics": "2", "llm_calls": "1", "artifacts": "2", "samples": "0"}
		for _, table := range results.Tables {
			require.Equal(t, want[table], count(t, s, query, table, "r2"), "%s: a row written three times is one row", table)
		}
	})

	t.Run("EvaluationSamples", func(t *testing.T) {
		s, query := setup(t)
		require.NoError(t, s.Sink.Write(ctx, Evaluated("r5")))
		rows := query("SELECT input, repeat, value, correct, host FROM %s WHERE run = 'r5' ORDER BY input, repeat", final(s, "samples"))
		require.Equal(t, [][]string{{"N=1000", "0", "9", "1", "h1"}, {"N=1000", "1", "10", "1", "h1"}, {"N=1000", "2", "11", "1", "h1"},
			{"N=1000", "3", "10.5", "1", "h1"}}, strsAll(rows), "every repeat, the warm-up too")
		rows = query("SELECT metric_value, metric_from, self_reported, metric_q1, metric_q3, metric_low, metric_high, metric_bound FROM %s WHERE run = 'r5'",
			final(s, "nodes"))
		require.Equal(t, [][]string{{"10.5", "evaluator", "5000", "10.25", "10.75", "10", "11", "249.2"}}, strsAll(rows))
	})

	t.Run("LatestStateWins", func(t *testing.T) {
		s, query := setup(t)
		require.NoError(t, s.Sink.Write(ctx, Sample("r3")))
		require.NoError(t, s.Sink.Write(ctx, results.Rows{
			Runs:  []results.Run{{Run: "r3", Status: "done", Title: "stencil", Mode: "local", Config: "{}", TS: T0.Add(time.Hour)}},
			Nodes: []results.Node{{Run: "r3", Node: "n2", Parent: "n1", Stage: 1, Kind: "debug", Pool: "cpu", Attempt: 1, Status: "ok", TS: T0.Add(2 * time.Hour)}},
		}))
		require.Equal(t, [][]string{{"done"}}, strsAll(query("SELECT status FROM %s WHERE run = 'r3'", final(s, "runs"))))
		require.Equal(t, [][]string{{"n1", "ok"}, {"n2", "ok"}}, strsAll(query("SELECT node, status FROM %s WHERE run = 'r3' ORDER BY node", final(s, "nodes"))))
	})

	t.Run("DocQueries", func(t *testing.T) {
		s, query := setup(t)
		require.NoError(t, s.Sink.Write(ctx, Sample("r4")))
		for _, q := range DocQueries[s.Dialect] {
			require.NotEmpty(t, query("%s", q), q)
		}
	})
}

func strs(row []any) []string {
	out := make([]string, len(row))
	for i, v := range row {
		rv := reflect.ValueOf(v)
		for rv.Kind() == reflect.Pointer && !rv.IsNil() {
			rv = rv.Elem()
		}
		switch {
		case !rv.IsValid() || rv.Kind() == reflect.Pointer:
			out[i] = "NULL"
		default:
			out[i] = fmt.Sprint(rv.Interface())
		}
	}
	return out
}

func strsAll(rows [][]any) [][]string {
	out := make([][]string, len(rows))
	for i, r := range rows {
		out[i] = strs(r)
	}
	return out
}
