package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/chdb"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/schema"
)

// TestMain: the benchmark starts its workers and endpoint in a child, this
// binary again.
func TestMain(m *testing.M) {
	if url := os.Getenv(childEnv); url != "" {
		if err := child(url); err != nil {
			fmt.Fprintln(os.Stderr, "bench-engine child:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(m.Run())
}

// TestBenchLine: a small tree through the whole benchmark prints its
// line; with -code-bytes each node's code has a C file of that size.
func TestBenchLine(t *testing.T) {
	heap := filepath.Join(t.TempDir(), "heap")
	base := t.TempDir()
	line, err := measure(40, options{workers: 2, slots: 4, codeBytes: 4000, chunk: defaultChunk, base: base, heap: heap, store: storeSQLite})
	require.NoError(t, err)
	task, err := os.ReadFile(filepath.Join(base, "run-bench-40", "nodes", "n0001", "task.json"))
	require.NoError(t, err)
	var tk schema.NodeTask
	require.NoError(t, json.Unmarshal(task, &tk))
	files := tk.Artifacts.Coding.Workspace.Files
	require.Len(t, files, 2)
	require.Equal(t, "stencil.c", files[1].Path)
	require.InDelta(t, 4000, len(files[1].Content), 400)
	require.Contains(t, files[1].Content, "#pragma omp parallel for")
	fi, err := os.Stat(heap + ".40")
	require.NoError(t, err, "the heap profile at 95% of the nodes")
	require.NotZero(t, fi.Size())
	require.Regexp(t, regexp.MustCompile(`^bench-engine nodes=40 workers=2 slots=4 sched_cpu_ms_per_node_p50=[0-9.]+ sched_cpu_ms_per_node_p99=[0-9.]+ wall_s=[0-9.]+ resume_s=[0-9.]+ peak_rss_mb=[0-9]+ journal_bytes=[1-9][0-9]*$`), line)
	t.Log(line)
}

// TestBenchLineCluster: the benchmark in cluster mode (memory in Redis and
// ClickHouse, results in ClickHouse, the queue on a nats-server process)
// says so on its line, and every node's row reaches ClickHouse from the
// workers' and the scheduler's sinks.
func TestBenchLineCluster(t *testing.T) {
	r := testutil.StartService(t, "redis")
	c := testutil.StartService(t, "clickhouse")
	n := testutil.StartService(t, "nats")
	t.Setenv("HPCQ_REDIS_URL", r.Env["HPCQ_REDIS_URL"])
	t.Setenv("HPCQ_CLICKHOUSE_DSN", c.Env["HPCQ_CLICKHOUSE_DSN"])
	line, err := measure(40, options{workers: 2, slots: 4, chunk: defaultChunk, base: t.TempDir(), store: storeCluster, natsURL: n.Env["HPCQ_NATS_URL"]})
	require.NoError(t, err)
	require.Regexp(t, regexp.MustCompile(`^bench-engine nodes=40 workers=2 slots=4 .* journal_bytes=[1-9][0-9]* store=redis\+clickhouse nats=server$`), line)
	ctx := context.Background()
	conn, err := chdb.Open(ctx, c.Env["HPCQ_CLICKHOUSE_DSN"])
	require.NoError(t, err)
	defer conn.Close()
	var nodes, runs uint64
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(), uniqExact(run) FROM nodes FINAL WHERE run LIKE 'run-bench-40-%' AND status = 'ok'").Scan(&nodes, &runs))
	require.Equal(t, uint64(40), nodes)
	require.Equal(t, uint64(1), runs)
	t.Log(line)
}

// TestBenchClusterNeedsServers: cluster mode without the servers' settings
// says which to set.
func TestBenchClusterNeedsServers(t *testing.T) {
	t.Setenv("HPCQ_REDIS_URL", "")
	t.Setenv("HPCQ_CLICKHOUSE_DSN", "")
	_, err := measure(8, options{workers: 1, slots: 2, base: t.TempDir(), store: storeCluster})
	require.ErrorContains(t, err, "HPCQ_REDIS_URL and HPCQ_CLICKHOUSE_DSN")
	_, err = measure(8, options{workers: 1, slots: 2, base: t.TempDir(), store: "postgres"})
	require.ErrorContains(t, err, `-store "postgres"`)
}
