package stores_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/stores"
)

// TestLocalStores: without servers, a run's memory and results are the
// SQLite files of its run directory, named in run.json's terms; a Redis URL
// alone is warned about, not half-used; an export reopens what run.json
// names and says what it needs when that is the cluster store.
func TestLocalStores(t *testing.T) {
	ctx := context.Background()
	dir := rundir.Dir(filepath.Join(t.TempDir(), "20261123-000000-aaaaaa"))
	require.NoError(t, os.MkdirAll(string(dir), 0o755))
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))

	mem, where, err := stores.OpenMemory(ctx, config.Store{RedisURL: "redis://127.0.0.1:1/0"}, dir, log)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"enabled": "true", "store": stores.MemorySQLite, "file": rundir.MemoryDB}, where)
	require.Contains(t, logs.String(), "HPCQ_REDIS_URL is set without HPCQ_CLICKHOUSE_DSN")
	_, err = mem.Fork(ctx, memory.ForkParams{Branch: "root"})
	require.NoError(t, err)
	require.NoError(t, mem.Close())
	require.FileExists(t, dir.Path(rundir.MemoryDB))

	sink, where, err := stores.OpenResults(ctx, config.Store{}, dir, log)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"store": "sqlite", "file": rundir.ResultsFile}, where)
	require.NoError(t, sink.Write(ctx, results.Rows{Runs: []results.Run{{Run: dir.ID(), Status: results.RunDone}}}))
	require.NoError(t, sink.Close())
	tab, err := results.QuerySQLite(ctx, dir.Path(rundir.ResultsFile), "SELECT status FROM runs")
	require.NoError(t, err)
	require.Equal(t, [][]any{{"done"}}, tab.Rows)

	again, err := stores.ReopenMemory(ctx, config.Store{}, dir, stores.MemorySQLite, log)
	require.NoError(t, err)
	_, err = again.BranchGet(ctx, "root")
	require.NoError(t, err, "the export sees what the run wrote")
	require.NoError(t, again.Close())
	none, err := stores.ReopenMemory(ctx, config.Store{}, dir, "", log)
	require.NoError(t, err)
	require.Nil(t, none, "a run with memory off has none to reopen")
	_, err = stores.ReopenMemory(ctx, config.Store{}, dir, stores.MemoryCluster, log)
	require.ErrorContains(t, err, "set HPCQ_REDIS_URL and HPCQ_CLICKHOUSE_DSN")
}
