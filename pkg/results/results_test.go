package results_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/chdb"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/results/resultstest"
	"github.com/hpcq/hpcq/pkg/schema"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// sample is the conformance suite's sample run.
var sample = resultstest.Sample

// TestRowsOfAResult: the attempt rows and the node row of a result.
func TestRowsOfAResult(t *testing.T) {
	rows := sample("r1")
	require.Len(t, rows.PhaseRuns, 3)
	require.Equal(t, "gcc", rows.PhaseRuns[0].Compiler)
	require.Equal(t, "mpicc", rows.PhaseRuns[2].Compiler)
	require.Equal(t, "failed", rows.PhaseRuns[2].Status)
	require.Equal(t, schema.ErrKindCompileFailed, rows.PhaseRuns[2].ErrorKind)
	require.Equal(t, "", rows.PhaseRuns[0].ErrorKind)
	require.Len(t, rows.Metrics, 2)
	require.Equal(t, "GFLOP/s", rows.Metrics[0].Unit)
	require.Equal(t, "gflops", rows.Nodes[0].MetricName, "the metric the run phase names")
	require.Equal(t, 12.5, *rows.Nodes[0].MetricValue)
	require.Equal(t, "failed", rows.Nodes[1].Status)
	require.Nil(t, rows.Nodes[1].MetricValue, "a failed node has no metric value")
	require.Equal(t, "n1", rows.Nodes[1].Parent)
	require.Equal(t, t0.Add(1500*time.Millisecond), rows.Metrics[0].TS)
}

// TestNodeRowOfAnEvaluatedResult: the nodes row carries the evaluator's
// measure, never the program's own number; a node it found wrong has none.
func TestNodeRowOfAnEvaluatedResult(t *testing.T) {
	task := &schema.NodeTask{RunID: "r1", NodeID: "n1", Attempt: 1, Artifacts: schema.Artifacts{Run: schema.RunPhase{
		MetricPatterns: []schema.MetricPattern{{Name: "gflops", Regex: `GFLOP/s: (\S+)`}}}}}
	twelve := 12.0
	r := &schema.NodeResult{Attempt: 1, Started: t0, Metrics: map[string]float64{"gflops": 5000, "a": 1},
		Evaluation: &schema.Evaluation{Stage: schema.EvalSearch, Correct: true, Metric: &twelve}}
	row := results.NodeRow(task, r, schema.NodeOK, "")
	require.Equal(t, "gflops", row.MetricName)
	require.Equal(t, 12.0, *row.MetricValue, "the evaluator's, not the program's 5000")
	r.Evaluation = &schema.Evaluation{Stage: schema.EvalSearch, Reason: "incorrect on N=10"}
	row = results.NodeRow(task, r, schema.NodeFailed, schema.ErrKindIncorrect)
	require.Nil(t, row.MetricValue)
	row = results.NodeRow(&schema.NodeTask{RunID: "r1", NodeID: "n2", Attempt: 1}, &schema.NodeResult{Attempt: 1,
		Evaluation: &schema.Evaluation{Correct: true, Metric: &twelve}}, schema.NodeOK, "")
	require.Equal(t, results.EvaluatedMetric, row.MetricName, "a program that reported nothing")
	require.Equal(t, 12.0, *row.MetricValue)
}

func TestCompiler(t *testing.T) {
	for cmd, want := range map[string]string{
		"gcc -O2 a.c":                  "gcc",
		"CC=clang env time make -j4":   "make",
		"/opt/cuda/bin/nvcc -o m m.cu": "nvcc",
		"   ":                          "",
	} {
		task := schema.NodeTask{Artifacts: schema.Artifacts{Compile: schema.CommandsPhase{Commands: []string{cmd}}}}
		require.Equal(t, want, results.Compiler(&task), cmd)
	}
}

// TestSQLite writes a run's rows into a SQLite file and reads them back
// with the real sqlite3 CLI and with QuerySQLite.
func TestSQLite(t *testing.T) {
	testutil.RequireBinary(t, "sqlite3", "scripts/services.sh install sqlite3")
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hpcq.sqlite")
	s, err := results.OpenSQLite(path)
	require.NoError(t, err)
	require.NoError(t, s.Write(ctx, sample("r1")))
	// A second write of the same keys replaces, as in ClickHouse.
	require.NoError(t, s.Write(ctx, results.Rows{Runs: []results.Run{{Run: "r1", Status: "done", Title: "stencil", Mode: "local", Config: "{}", TS: t0.Add(time.Hour)}}}))
	require.NoError(t, s.Close())

	out, err := exec.Command("sqlite3", "-readonly", path,
		"SELECT compiler, COUNT(*), SUM(status = 'failed') FROM phase_runs WHERE phase = 'compile' GROUP BY compiler ORDER BY compiler;"+
			"SELECT status, ts FROM runs;"+
			"SELECT node, name, value, unit FROM metrics ORDER BY name;"+
			"SELECT node, tokens_in + tokens_out FROM llm_calls;").CombinedOutput()
	require.NoError(t, err, string(out))
	require.Equal(t, "gcc|1|0\nmpicc|1|1\ndone|2026-11-22 11:00:00\nn1|gflops|12.5|GFLOP/s\nn1|time_s|0.75|\nn1|1500\n", string(out))

	for _, table := range results.Tables {
		out, err := exec.Command("sqlite3", "-readonly", path, "SELECT name FROM pragma_table_info('"+table+"') ORDER BY cid").CombinedOutput()
		require.NoError(t, err, string(out))
		require.Equal(t, results.Columns[table], strings.Fields(string(out)), table)
	}

	tab, err := results.QuerySQLite(ctx, path, `SELECT node, metric_name, metric_value FROM nodes ORDER BY metric_value DESC LIMIT 1`)
	require.NoError(t, err)
	require.Equal(t, []string{"node", "metric_name", "metric_value"}, tab.Columns)
	require.Equal(t, [][]any{{"n1", "gflops", 12.5}}, tab.Rows)
	checkDocQueries(t, "sqlite", func(q string) (*results.Table, error) { return results.QuerySQLite(ctx, path, q) })
	_, err = results.QuerySQLite(ctx, path, `SELECT nope FROM nodes`)
	var qe *results.QueryError
	require.ErrorAs(t, err, &qe)
	require.Contains(t, err.Error(), "no such column: nope")
	require.Contains(t, err.Error(), "query: SELECT nope FROM nodes")
}

// TestSQLiteNullableMetric: a results file written when metric_value was NOT
// NULL (a run resumed from it) takes a node without a value; its rows stay.
func TestSQLiteNullableMetric(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.sqlite")
	out, err := exec.Command("sqlite3", path, `CREATE TABLE nodes (
  run TEXT NOT NULL, node TEXT NOT NULL, parent TEXT NOT NULL, stage INTEGER NOT NULL, kind TEXT NOT NULL,
  pool TEXT NOT NULL, attempt INTEGER NOT NULL, status TEXT NOT NULL, error_kind TEXT NOT NULL,
  metric_name TEXT NOT NULL, metric_value REAL NOT NULL, ts_ms INTEGER NOT NULL, ts TEXT NOT NULL,
  PRIMARY KEY (run, node));
INSERT INTO nodes VALUES ('r1','n1','',1,'draft','cpu',1,'ok','','gflops',3.5,1,'2026-11-22 11:00:00');`).CombinedOutput()
	require.NoError(t, err, string(out))
	s, err := results.OpenSQLite(path)
	require.NoError(t, err)
	require.NoError(t, s.Write(context.Background(), sample("r2")))
	require.NoError(t, s.Write(context.Background(), gated("r2")))
	require.NoError(t, s.Close())
	out, err = exec.Command("sqlite3", "-readonly", path, "SELECT run, node, ifnull(metric_value, 'NULL'), metric_from, ifnull(self_reported, 'NULL'), "+
		"held_out, ifnull(held_out_metric, 'NULL') FROM nodes ORDER BY run, node").CombinedOutput()
	require.NoError(t, err, string(out))
	require.Equal(t, "r1|n1|3.5||NULL||NULL\nr2|n1|12.5||NULL||NULL\nr2|n2|NULL||NULL||NULL\nr2|n3|9.5|evaluator|5000.0|overfit|6.25\n", string(out))
}

// gated is a node row of run whose metric the evaluator measured (the
// program said 5000 of itself) and that the held-out gate found overfit.
func gated(run string) results.Rows {
	v, self, held := 9.5, 5000.0, 6.25
	return results.Rows{Nodes: []results.Node{{Run: run, Node: "n3", Parent: "n1", Stage: 2, Kind: "improve", Pool: "cpu", Attempt: 1,
		Status: "ok", MetricName: "gflops", MetricValue: &v, TS: t0.Add(time.Hour), MetricFrom: "evaluator", SelfReported: &self,
		HeldOut: "overfit", HeldOutMetric: &held}}}
}

// TestSQLiteLLMTokenColumns: a results file written before llm_calls had
// reasoning_tokens, cached_tokens and tokens_estimated (a run resumed from
// it) gets them; its rows have 0.
func TestSQLiteLLMTokenColumns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.sqlite")
	out, err := exec.Command("sqlite3", path, `CREATE TABLE llm_calls (
  run TEXT NOT NULL, node TEXT NOT NULL, call_id TEXT NOT NULL, purpose TEXT NOT NULL, model TEXT NOT NULL,
  tokens_in INTEGER NOT NULL, tokens_out INTEGER NOT NULL, latency_ms REAL NOT NULL, cost_usd REAL NOT NULL,
  cache_hit INTEGER NOT NULL, error TEXT NOT NULL, ts_ms INTEGER NOT NULL, ts TEXT NOT NULL,
  PRIMARY KEY (run, node, call_id)) WITHOUT ROWID;
INSERT INTO llm_calls VALUES ('r1','n1','c0','draft','m',10,5,1.5,0.1,0,'',1,'2026-11-22 11:00:00');`).CombinedOutput()
	require.NoError(t, err, string(out))
	s, err := results.OpenSQLite(path)
	require.NoError(t, err)
	rows := sample("r2")
	rows.LLMCalls[0].ReasoningTokens, rows.LLMCalls[0].CachedTokens = 200, 64
	require.NoError(t, s.Write(context.Background(), rows))
	require.NoError(t, s.Close())
	out, err = exec.Command("sqlite3", "-readonly", path, "SELECT run, reasoning_tokens, cached_tokens, tokens_estimated FROM llm_calls ORDER BY run").CombinedOutput()
	require.NoError(t, err, string(out))
	require.Equal(t, "r1|0|0|0\nr2|200|64|1\n", string(out))
}

func TestTableFormats(t *testing.T) {
	tab := &results.Table{Columns: []string{"node", "value", "ts"}, Rows: [][]any{{"n1", 12.5, t0}, {"n,2", nil, t0}}}
	var b bytes.Buffer
	require.NoError(t, tab.Write(&b, "table"))
	require.Equal(t, "node  value  ts\nn1    12.5   2026-11-22 10:00:00\nn,2   NULL   2026-11-22 10:00:00\n", b.String())
	b.Reset()
	require.NoError(t, tab.Write(&b, "csv"))
	require.Equal(t, "node,value,ts\nn1,12.5,2026-11-22 10:00:00\n\"n,2\",NULL,2026-11-22 10:00:00\n", b.String())
	b.Reset()
	require.NoError(t, tab.Write(&b, "json"))
	var got []map[string]any
	require.NoError(t, json.Unmarshal(b.Bytes(), &got))
	require.Equal(t, []map[string]any{{"node": "n1", "value": 12.5, "ts": "2026-11-22 10:00:00"}, {"node": "n,2", "value": nil, "ts": "2026-11-22 10:00:00"}}, got)
	require.Equal(t, "[\n  {\"node\": \"n1\", \"value\": 12.5, \"ts\": \"2026-11-22 10:00:00\"},\n  {\"node\": \"n,2\", \"value\": null, \"ts\": \"2026-11-22 10:00:00\"}\n]\n",
		b.String(), "the keys keep the SELECT's column order")
	b.Reset()
	require.NoError(t, (&results.Table{Columns: []string{"n"}}).Write(&b, "json"))
	require.Equal(t, "[]\n", b.String(), "no rows: an empty array")
	require.Error(t, tab.Write(&b, "yaml"))
}

// TestClickHouse writes through the spooled sink, with ClickHouse stopped in
// the middle, and reads the rows back with the real clickhouse-client:
// everything written is there exactly once.
func TestClickHouse(t *testing.T) {
	testutil.RequireBinary(t, "clickhouse-client", "scripts/services.sh install clickhouse")
	ctx := context.Background()
	c := testutil.StartService(t, "clickhouse")
	dsn, port := c.Env["HPCQ_CLICKHOUSE_DSN"], c.Env["HPCQ_CLICKHOUSE_TCP_PORT"]
	s, err := results.OpenClickHouse(ctx, results.ClickHouseOptions{DSN: dsn, SpoolDir: t.TempDir(), Name: "w1"})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Write(ctx, sample("r1")))
	require.NoError(t, s.Write(ctx, gated("r1")))
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, s.Flush(fctx))

	c.Stop()
	require.NoError(t, s.Write(ctx, sample("r2")), "writes go on while ClickHouse is away")
	time.Sleep(500 * time.Millisecond) //nolint:forbidigo // ClickHouse stays away a while
	c.Start()
	require.NoError(t, s.Flush(fctx))

	client := func(q string) string {
		out, err := exec.Command("clickhouse-client", "--host", "127.0.0.1", "--port", port, "--query", q).CombinedOutput()
		require.NoError(t, err, string(out))
		return string(out)
	}
	require.Equal(t, "r1\tgcc\t1\t0\nr1\tmpicc\t1\t1\nr2\tgcc\t1\t0\nr2\tmpicc\t1\t1\n",
		client("SELECT run, compiler, count(), countIf(status = 'failed') FROM phase_runs FINAL WHERE phase = 'compile' GROUP BY run, compiler ORDER BY run, compiler"))
	require.Equal(t, "r1\t2\nr2\t2\n", client("SELECT run, count() FROM metrics FINAL GROUP BY run ORDER BY run"))
	require.Equal(t, "r1\tn1\t12.5\nr2\tn1\t12.5\n", client("SELECT run, argMax(node, metric_value), max(metric_value) FROM nodes FINAL GROUP BY run ORDER BY run"))
	require.Equal(t, "1500\n", client("SELECT sum(tokens_in + tokens_out) FROM llm_calls FINAL WHERE run = 'r2'"))
	require.Equal(t, "n1\t12.5\t\t\\N\t\t\\N\nn2\t\\N\t\t\\N\t\t\\N\nn3\t9.5\tevaluator\t5000\toverfit\t6.25\n",
		client("SELECT node, metric_value, metric_from, self_reported, held_out, held_out_metric FROM nodes FINAL WHERE run = 'r1' ORDER BY node"))

	for _, table := range results.Tables {
		var cols []string
		for _, l := range strings.Split(strings.TrimSpace(client("DESCRIBE TABLE "+table)), "\n") {
			cols = append(cols, strings.Fields(l)[0])
		}
		require.Equal(t, results.Columns[table], cols, table)
	}

	conn, err := chdb.Open(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close()
	tab, err := results.QueryClickHouse(ctx, conn, "SELECT run, node, name, value FROM metrics FINAL WHERE run = 'r1' ORDER BY name")
	require.NoError(t, err)
	require.Equal(t, [][]any{{"r1", "n1", "gflops", 12.5}, {"r1", "n1", "time_s", 0.75}}, tab.Rows)
	checkDocQueries(t, "clickhouse", func(q string) (*results.Table, error) { return results.QueryClickHouse(ctx, conn, q) })
	_, err = results.QueryClickHouse(ctx, conn, "SELECT nope FROM metrics")
	require.ErrorContains(t, err, "nope")
	require.ErrorContains(t, err, "query: SELECT nope FROM metrics")
	keys := make([]string, 0)
	for k := range results.Columns {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	require.Equal(t, []string{"artifacts", "llm_calls", "metrics", "nodes", "phase_runs", "runs", "samples"}, keys)
}

// checkDocQueries runs the documented queries; each must answer rows.
func checkDocQueries(t *testing.T, dialect string, query func(string) (*results.Table, error)) {
	t.Helper()
	for _, q := range resultstest.DocQueries[results.Dialect(dialect)] {
		tab, err := query(q)
		require.NoError(t, err, q)
		require.NotEmpty(t, tab.Rows, q)
	}
}

// TestLLMCallsKeepEveryCall: calls in the same millisecond are distinct
// rows (each gets a call id), and the caller's rows are not modified.
func TestLLMCallsKeepEveryCall(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hpcq.sqlite")
	s, err := results.OpenSQLite(path)
	require.NoError(t, err)
	defer s.Close()
	calls := []results.LLMCall{{Run: "r", Node: "n", Purpose: "draft", TS: t0}, {Run: "r", Node: "n", Purpose: "draft", TS: t0},
		{Run: "r", Node: "n", CallID: "given", Purpose: "draft", TS: t0}}
	require.NoError(t, s.Write(ctx, results.Rows{LLMCalls: calls}))
	require.Empty(t, calls[0].CallID, "the caller's rows are left alone")
	tab, err := results.QuerySQLite(ctx, path, `SELECT COUNT(*), COUNT(DISTINCT call_id), SUM(call_id = 'given') FROM llm_calls`)
	require.NoError(t, err)
	require.Equal(t, []any{int64(3), int64(3), int64(1)}, tab.Rows[0])
}

// TestConformance runs the results conformance suite on SQLite and on a
// real ClickHouse.
func TestConformance(t *testing.T) {
	ctx := context.Background()
	t.Run("sqlite", func(t *testing.T) {
		resultstest.Exercise(t, func(t *testing.T) resultstest.Store {
			path := filepath.Join(t.TempDir(), "hpcq.sqlite")
			s, err := results.OpenSQLite(path)
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return resultstest.Store{Sink: s, Dialect: results.DialectSQLite,
				Query: func(ctx context.Context, q string) (*results.Table, error) { return results.QuerySQLite(ctx, path, q) }}
		})
	})
	t.Run("clickhouse", func(t *testing.T) {
		testutil.RequireBinary(t, "clickhouse-server", "scripts/services.sh install clickhouse")
		dsn := testutil.StartService(t, "clickhouse").Env["HPCQ_CLICKHOUSE_DSN"]
		conn, err := chdb.Open(ctx, dsn)
		require.NoError(t, err)
		defer conn.Close()
		resultstest.Exercise(t, func(t *testing.T) resultstest.Store {
			s, err := results.OpenClickHouse(ctx, results.ClickHouseOptions{DSN: dsn, SpoolDir: t.TempDir(), Name: "conformance", Logger: testutil.Logger(t)})
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return resultstest.Store{Sink: s, Dialect: results.DialectClickHouse, Flush: s.Flush,
				Query: func(ctx context.Context, q string) (*results.Table, error) {
					return results.QueryClickHouse(ctx, conn, q)
				}}
		})
	})
}

// TestSQLiteGroupCommit: writes made at once (committed together) all
// land, each whole, and one that SQLite refuses (a NaN metric is NULL to
// SQLite, and metrics.value is NOT NULL) fails alone.
func TestSQLiteGroupCommit(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hpcq.sqlite")
	s, err := results.OpenSQLite(path)
	require.NoError(t, err)
	const n = 64
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rows := results.Rows{
				LLMCalls: []results.LLMCall{{Run: "g", Node: fmt.Sprintf("n%d", i), CallID: "c1", Purpose: "draft", Model: "m", TokensIn: int64(i), TS: t0}},
				Metrics:  []results.Metric{{Run: "g", Node: fmt.Sprintf("n%d", i), Attempt: 1, Name: "gflops", Value: float64(i), TS: t0}},
			}
			if i == 13 {
				rows.Metrics[0].Value = math.NaN()
			}
			errs[i] = s.Write(ctx, rows)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if i == 13 {
			require.ErrorContains(t, err, "NOT NULL", "the refused write")
			continue
		}
		require.NoError(t, err, "write %d", i)
	}
	require.NoError(t, s.Close())
	tab, err := results.QuerySQLite(ctx, path, `SELECT (SELECT count(*) FROM llm_calls), (SELECT count(*) FROM metrics), (SELECT count(*) FROM llm_calls WHERE node = 'n13')`)
	require.NoError(t, err)
	require.Equal(t, [][]any{{int64(n - 1), int64(n - 1), int64(0)}}, tab.Rows, "every write but the refused one, each whole")
}

// TestSQLiteManyRows: a write of more rows than one INSERT takes (150
// metrics: INSERTs of 64, 64, 16, 4 and 2 rows) stores each, a row
// written twice in the write keeps its later value (as one INSERT per row
// did), and a second write replaces rows of the first.
func TestSQLiteManyRows(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hpcq.sqlite")
	s, err := results.OpenSQLite(path)
	require.NoError(t, err)
	var rows results.Rows
	for i := range 150 {
		rows.Metrics = append(rows.Metrics, results.Metric{Run: "m", Node: fmt.Sprintf("n%03d", i%140), Attempt: 1, Name: "gflops", Value: float64(i), TS: t0})
	}
	rows.Nodes = []results.Node{{Run: "m", Node: "n000", Stage: 1, Kind: "draft", Status: "ok", TS: t0}}
	require.NoError(t, s.Write(ctx, rows))
	require.NoError(t, s.Write(ctx, results.Rows{Metrics: []results.Metric{{Run: "m", Node: "n001", Attempt: 1, Name: "gflops", Value: -1, TS: t0}}}))
	require.NoError(t, s.Close())
	tab, err := results.QuerySQLite(ctx, path, `SELECT count(*), sum(value) FROM metrics`)
	require.NoError(t, err)
	// n000..n139 once; n000..n009 hold 140..149; n001 then -1.
	want := 0.0
	for i := range 140 {
		want += float64(i)
	}
	want += 10 * 140 // 140..149 in place of 0..9
	want += -1 - 141 // n001: -1 in place of 141
	require.Equal(t, [][]any{{int64(140), want}}, tab.Rows)
	tab, err = results.QuerySQLite(ctx, path, `SELECT count(*) FROM nodes`)
	require.NoError(t, err)
	require.Equal(t, [][]any{{int64(1)}}, tab.Rows)
}
