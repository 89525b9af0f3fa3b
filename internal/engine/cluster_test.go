package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/chdb"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/memory/cluster"
	"github.com/hpcq/hpcq/pkg/results"
)

// TestRunOnRedisAndClickHouse: the cluster stores under a whole run: the
// memory on Redis + ClickHouse, the results in ClickHouse written by the
// scheduler side (as for remote workers without ClickHouse access).
func TestRunOnRedisAndClickHouse(t *testing.T) {
	t.Parallel()
	r := testutil.StartService(t, "redis")
	c := testutil.StartService(t, "clickhouse")
	dsn := c.Env["HPCQ_CLICKHOUSE_DSN"]
	spec := newSpec(t)
	spec.Stages.InitialImplementation.MaxIterations, spec.Search.NumDrafts = 3, 2
	e := setup(t, spec, normal, "")
	ctx := context.Background()
	runID := filepath.Base(e.dir)
	store, err := cluster.Open(ctx, cluster.Options{Run: runID, RedisURL: r.Env["HPCQ_REDIS_URL"], ClickHouseDSN: dsn,
		SpoolDir: t.TempDir(), Logger: testutil.Logger(t)})
	require.NoError(t, err)
	sink, err := results.OpenClickHouse(ctx, results.ClickHouseOptions{DSN: dsn, SpoolDir: t.TempDir(), Name: "scheduler", Logger: testutil.Logger(t)})
	require.NoError(t, err)
	e.sp.MemoryStore, e.sp.Results, e.p.Results, e.p.WorkersWriteResults = store, sink, sink, false

	sum, err := runEngine(t, ctx, e.sp, e.p)
	require.NoError(t, err)
	require.Equal(t, 3, sum.Nodes)
	require.NoError(t, store.Close())
	require.NoError(t, sink.Close())

	md, err := os.ReadFile(filepath.Join(e.dir, "memory", "final_memory_for_paper.md"))
	require.NoError(t, err)
	require.Contains(t, string(md), "[SUCCESS, stage:initial_implementation]")

	conn, err := chdb.Open(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close()
	for query, want := range map[string]string{
		fmt.Sprintf("SELECT count() FROM nodes FINAL WHERE run = '%s' AND status = 'ok'", runID):                 "3",
		fmt.Sprintf("SELECT count() FROM phase_runs FINAL WHERE run = '%s' AND phase = 'run'", runID):            "3",
		fmt.Sprintf("SELECT count() FROM llm_calls FINAL WHERE run = '%s' AND purpose = 'phase0'", runID):        "3",
		fmt.Sprintf("SELECT count() FROM archival FINAL WHERE run = '%s' AND has(tags, 'SUCCESS')", runID):       "3",
		fmt.Sprintf("SELECT count() FROM recall_events FINAL WHERE run = '%s' AND kind = 'node_created'", runID): "3",
	} {
		tab, err := results.QueryClickHouse(ctx, conn, query)
		require.NoError(t, err, query)
		require.Equal(t, want, fmt.Sprint(tab.Rows[0][0]), query)
	}
}
