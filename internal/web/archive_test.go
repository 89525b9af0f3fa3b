package web_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/chdb"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/internal/web"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// TestArchive: with a ClickHouse results store, the runs it knows that
// have no directory here are listed and shown from its tables, next to
// the run directories (a run in both is listed once, from its directory).
func TestArchive(t *testing.T) {
	testutil.RequireBinary(t, "clickhouse-server", "scripts/services.sh install clickhouse")
	ctx := context.Background()
	dsn := testutil.StartService(t, "clickhouse").Env["HPCQ_CLICKHOUSE_DSN"]
	sink, err := results.OpenClickHouse(ctx, results.ClickHouseOptions{DSN: dsn, SpoolDir: t.TempDir(), Name: "web", Logger: testutil.Logger(t)})
	require.NoError(t, err)
	defer sink.Close()
	dir := fixture(t)
	here := rundir.Dir(dir).ID()
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	m1, m2 := 2.5, 4.0
	config := `{"Title":"stencil","Metric":{"Name":"gflops","Direction":"maximize","Unit":"GFLOP/s"}}`
	rows := results.Rows{
		Runs: []results.Run{{Run: "arch-1", Status: schema.RunDone, Title: "stencil on the cluster", Mode: "cluster", Config: config, TS: t0},
			{Run: here, Status: schema.RunDone, Title: "also here", Mode: "local", Config: "{}", TS: t0}},
		Nodes: []results.Node{{Run: "arch-1", Node: "n0001", Stage: 1, Kind: "draft", Pool: "cpu", Attempt: 1, Status: "ok", MetricName: "gflops", MetricValue: &m1, TS: t0},
			{Run: "arch-1", Node: "n0002", Parent: "n0001", Stage: 1, Kind: "debug", Pool: "cpu", Attempt: 1, Status: "ok", MetricName: "gflops", MetricValue: &m2, TS: t0},
			{Run: "arch-1", Node: "n0003", Parent: "n0002", Stage: 2, Kind: "hyperparam", Pool: "cpu", Attempt: 1, Status: "failed", ErrorKind: "compile_failed", TS: t0}},
		PhaseRuns: []results.PhaseRun{{Run: "arch-1", Node: "n0002", Attempt: 1, Worker: "w-17", Phase: "compile", Status: "ok", DurationMS: 300, TS: t0.Add(time.Second)},
			{Run: "arch-1", Node: "n0002", Attempt: 1, Worker: "w-17", Phase: "run", Status: "ok", DurationMS: 900, TS: t0.Add(2 * time.Second)}},
		Metrics:   []results.Metric{{Run: "arch-1", Node: "n0002", Attempt: 1, Name: "gflops", Value: 4, Unit: "GFLOP/s", TS: t0}},
		LLMCalls:  []results.LLMCall{{Run: "arch-1", Node: "n0002", Purpose: "debug", Model: "m", TokensIn: 100, TokensOut: 50, CostUSD: 0.25, TS: t0}},
		Artifacts: []results.Artifact{{Run: "arch-1", Node: "n0002", Attempt: 1, Kind: "log", Name: "run.log", Path: "nodes/n0002/logs/run.log", Bytes: 10, SHA256: "x", TS: t0}},
	}
	require.NoError(t, sink.Write(ctx, rows))
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, sink.Flush(fctx))
	conn, err := chdb.Open(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close()
	ts := newServer(t, dir, web.Options{Archive: func(ctx context.Context, sql string) (*results.Table, error) {
		return results.QueryClickHouse(ctx, conn, sql)
	}})

	code, body, _ := get(t, ts, "/api/runs")
	require.Equal(t, 200, code, body)
	var runs struct {
		Runs  []web.RunSummary
		Error string `json:"archive_error"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &runs))
	require.Empty(t, runs.Error)
	require.Len(t, runs.Runs, 2, "the run in both is listed once")
	require.Equal(t, here, runs.Runs[0].ID)
	require.Equal(t, web.SourceDir, runs.Runs[0].Source)
	a := runs.Runs[1]
	require.Equal(t, "arch-1", a.ID)
	require.Equal(t, web.SourceArchive, a.Source)
	require.Equal(t, schema.RunDone, a.Status, "the runs row's status as it is")
	require.Equal(t, "stencil on the cluster", a.Title)
	require.Equal(t, [4]int{3, 3, 1}, [4]int{a.Nodes, a.Done, a.Buggy})
	require.Equal(t, "n0002", a.Best)
	require.Equal(t, 4.0, *a.BestValue)
	require.Equal(t, "gflops", a.Metric)
	require.Equal(t, int64(1), a.LLMCalls)
	require.Equal(t, 0.25, a.CostUSD)

	code, body, _ = get(t, ts, "/api/runs/arch-1")
	require.Equal(t, 200, code, body)
	var det web.RunDetail
	require.NoError(t, json.Unmarshal([]byte(body), &det))
	require.Equal(t, []string{"n0001", "n0002"}, det.BestPath)
	require.Len(t, det.Cost, 1)

	code, body, _ = get(t, ts, "/api/runs/arch-1/nodes")
	require.Equal(t, 200, code, body)
	var nodes struct{ Nodes []web.NodeView }
	require.NoError(t, json.Unmarshal([]byte(body), &nodes))
	require.Len(t, nodes.Nodes, 3)
	n2 := nodes.Nodes[1]
	require.Equal(t, "n0001", n2.Parent)
	require.Equal(t, "w-17", n2.Worker)
	require.Equal(t, int64(1200), *n2.DurationMS)
	require.Equal(t, "compile_failed", nodes.Nodes[2].Reason)

	code, body, _ = get(t, ts, "/api/runs/arch-1/nodes/n0002")
	require.Equal(t, 200, code, body)
	var node map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &node))
	require.Len(t, node["phases"], 2)
	require.Equal(t, 4.0, node["metrics"].(map[string]any)["gflops"])
	require.Len(t, node["llm_calls"], 1)
	require.Equal(t, 0.25, node["cost_usd"])
	require.Equal(t, []any{"n0003"}, node["children"])
	require.Contains(t, node["artifacts_note"], "nodes/n0002/logs/run.log")

	code, _, _ = get(t, ts, "/api/runs/arch-1/files/nodes/n0002/logs/run.log")
	require.Equal(t, 404, code)
	code, _, _ = get(t, ts, "/api/runs/arch-2")
	require.Equal(t, 404, code)
	ev := readEvents(t, ts.URL+"/api/runs/arch-1/events", 4, nil)
	require.Contains(t, ev[3], "event: run\n")
	require.Contains(t, ev[3], `"source":"clickhouse"`)
}
