package results_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/chdb"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/results"
)

func TestScopeToRun(t *testing.T) {
	for q, want := range map[string]string{
		"SELECT node FROM nodes ORDER BY node":           "SELECT node FROM (SELECT * FROM nodes FINAL WHERE run = 'r1') AS nodes ORDER BY node",
		"select * from hpcq.nodes final where stage = 1": "select * from (SELECT * FROM hpcq.nodes FINAL WHERE run = 'r1') AS nodes where stage = 1",
		"SELECT m.node FROM metrics AS m JOIN nodes n ON n.node = m.node": "SELECT m.node FROM (SELECT * FROM metrics FINAL WHERE run = 'r1') AS m " +
			"JOIN (SELECT * FROM nodes FINAL WHERE run = 'r1') n ON n.node = m.node",
		"SELECT stage FROM metrics ALL INNER JOIN (SELECT run, node, stage FROM nodes FINAL) USING (run, node)": "SELECT stage FROM " +
			"(SELECT * FROM metrics FINAL WHERE run = 'r1') AS metrics ALL INNER JOIN (SELECT run, node, stage FROM " +
			"(SELECT * FROM nodes FINAL WHERE run = 'r1') AS nodes) USING (run, node)",
		"SELECT a.x FROM nodes, `llm_calls`": "SELECT a.x FROM (SELECT * FROM nodes FINAL WHERE run = 'r1') AS nodes, " +
			"(SELECT * FROM `llm_calls` FINAL WHERE run = 'r1') AS llm_calls",
		// Not reads of hpcq's tables: a string, a comment, a column, a
		// table function, a name in a WHERE's list, another table.
		"SELECT 'FROM nodes', nodes.x FROM numbers(3) -- FROM nodes":     "SELECT 'FROM nodes', nodes.x FROM numbers(3) -- FROM nodes",
		"SELECT 1 FROM system.tables WHERE name IN ('nodes', 'metrics')": "SELECT 1 FROM system.tables WHERE name IN ('nodes', 'metrics')",
		"SHOW TABLES": "SHOW TABLES",
		"SELECT count() FROM recall_events WHERE branch = 'b1'": "SELECT count() FROM (SELECT * FROM recall_events FINAL WHERE run = 'r1') AS recall_events " +
			"WHERE branch = 'b1'",
	} {
		got, err := results.ScopeToRun(q, "r1")
		require.NoError(t, err, q)
		require.Equal(t, want, got, q)
	}
	_, err := results.ScopeToRun("SELECT 1", "r1' OR 1 = 1 --")
	require.ErrorContains(t, err, "run id")
}

// FuzzScopeToRun: any statement scopes without a panic; one that names
// none of hpcq's tables comes back as it was.
func FuzzScopeToRun(f *testing.F) {
	for _, s := range []string{"SELECT node FROM nodes", "SELECT 'it''s' FROM `nodes` n, metrics /* x */ FINAL", "FROM", "FROM db.", "'unterminated",
		"SELECT * FROM (SELECT * FROM nodes) JOIN llm_calls USING run", "\"nodes\"", "FROM nodes FINAL FINAL"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		out, err := results.ScopeToRun(q, "r1")
		require.NoError(t, err)
		if !strings.Contains(out, "WHERE run = 'r1'") {
			require.Equal(t, q, out)
		}
	})
}

// TestScopedQueriesAgree: two runs in one ClickHouse (one of them written
// twice, not yet merged) and each in its own SQLite file: every query a
// user is shown, scoped to a run, answers that run's rows on ClickHouse as
// SQLite does; unscoped, ClickHouse answers for both runs.
func TestScopedQueriesAgree(t *testing.T) {
	testutil.RequireBinary(t, "clickhouse-client", "scripts/services.sh install clickhouse")
	ctx := context.Background()
	c := testutil.StartService(t, "clickhouse")
	ch, err := results.OpenClickHouse(ctx, results.ClickHouseOptions{DSN: c.Env["HPCQ_CLICKHOUSE_DSN"], SpoolDir: t.TempDir(), Name: "w1"})
	require.NoError(t, err)
	defer ch.Close()
	other := sample("run-b")
	for i := range other.Metrics {
		other.Metrics[i].Value *= 3
	}
	for i := range other.Nodes {
		if v := other.Nodes[i].MetricValue; v != nil {
			other.Nodes[i].MetricValue = new(*v * 3)
		}
	}
	runs := map[string]results.Rows{"run-a": sample("run-a"), "run-b": other}
	files := map[string]string{}
	for run, rows := range runs {
		files[run] = filepath.Join(t.TempDir(), "hpcq.sqlite")
		s, err := results.OpenSQLite(files[run])
		require.NoError(t, err)
		require.NoError(t, s.Write(ctx, rows))
		require.NoError(t, s.Close())
		for range 2 { // two inserts: two parts, folded only by FINAL
			require.NoError(t, ch.Write(ctx, rows))
			fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			require.NoError(t, ch.Flush(fctx))
			cancel()
		}
	}
	conn, err := chdb.Open(ctx, c.Env["HPCQ_CLICKHOUSE_DSN"])
	require.NoError(t, err)
	defer conn.Close()
	csv := func(tab *results.Table, err error) string {
		require.NoError(t, err)
		var b bytes.Buffer
		require.NoError(t, tab.Write(&b, "csv"))
		_, body, _ := strings.Cut(b.String(), "\n") // the names may differ (n.stage, stage)
		return body
	}
	for _, q := range scopedQueries {
		for run := range runs {
			scoped, err := results.ScopeToRun(q.clickhouse, run)
			require.NoError(t, err)
			want := csv(results.QuerySQLite(ctx, files[run], q.sqlite))
			require.NotEmpty(t, want, q.sqlite)
			require.Equal(t, want, csv(results.QueryClickHouse(ctx, conn, scoped)), "%s\n%s", run, scoped)
		}
	}
	all := csv(results.QueryClickHouse(ctx, conn, "SELECT node, metric_value FROM nodes ORDER BY node"))
	require.Greater(t, strings.Count(all, "\n"), strings.Count(csv(results.QuerySQLite(ctx, files["run-a"], "SELECT node, metric_value FROM nodes")), "\n"),
		"unscoped, ClickHouse answers for every run (and unmerged copies)")
}

// scopedQueries are the queries a user is shown (the line every run
// prints, docs/results.md's examples), as each store writes them.
var scopedQueries = []struct{ sqlite, clickhouse string }{
	{sqlite: "SELECT node, stage, kind, status, metric_value FROM nodes ORDER BY node"},
	{sqlite: "SELECT name, value, unit FROM metrics ORDER BY name"},
	{sqlite: "SELECT node, phase, status, compiler, duration_ms FROM phase_runs ORDER BY node, phase"},
	{sqlite: "SELECT node, metric_name, metric_value FROM nodes WHERE status = 'ok' AND metric_name <> '' ORDER BY metric_value DESC LIMIT 1"},
	{sqlite: "SELECT node, sum(tokens_in) AS tokens_in, sum(tokens_out) AS tokens_out, sum(cost_usd) AS cost_usd FROM llm_calls GROUP BY node ORDER BY cost_usd DESC"},
	{sqlite: "SELECT compiler, COUNT(*) AS compiles, AVG(status = 'failed') AS failure_rate FROM phase_runs WHERE phase = 'compile' GROUP BY compiler ORDER BY compiler",
		clickhouse: "SELECT compiler, count() AS compiles, countIf(status = 'failed') / count() AS failure_rate FROM phase_runs FINAL WHERE phase = 'compile' " +
			"GROUP BY compiler ORDER BY compiler"},
	{sqlite: "SELECT n.stage, m.ts, m.node, m.value FROM metrics AS m JOIN nodes AS n ON n.run = m.run AND n.node = m.node WHERE m.name = 'gflops' ORDER BY n.stage, m.ts",
		clickhouse: "SELECT stage, ts, node, value FROM metrics ALL INNER JOIN (SELECT run, node, stage FROM nodes FINAL) USING (run, node) " +
			"WHERE name = 'gflops' ORDER BY stage, ts"},
}

func init() {
	for i := range scopedQueries {
		if scopedQueries[i].clickhouse == "" {
			scopedQueries[i].clickhouse = scopedQueries[i].sqlite
		}
	}
}
