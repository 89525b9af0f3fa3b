package schedcmd

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/stores"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// TestPurgeMemoryRefusals: purge --memory touches no server unless the run
// has ended and keeps its memory in Redis (the checks come before the
// queue is reached: no server runs here).
func TestPurgeMemoryRefusals(t *testing.T) {
	ctx := context.Background()
	dir := rundir.Dir(filepath.Join(t.TempDir(), "run-purge"))
	require.NoError(t, os.MkdirAll(dir.Path("journal"), 0o755))
	cfg := &config.Scheduler{}
	o := PurgeOptions{RunDir: string(dir), Memory: true, Log: testutil.Logger(t)}

	require.NoError(t, dir.WriteInfo(rundir.Info{RunID: dir.ID(), Command: "run", Mode: "cluster", NATSURL: "nats://127.0.0.1:1",
		Memory: map[string]string{"store": stores.MemoryCluster}}))
	require.ErrorContains(t, Purge(ctx, cfg, o), "run run-purge has not ended (no journal/end.json)")

	require.NoError(t, os.WriteFile(dir.Path(rundir.EndFile), []byte("{}\n"), 0o644))
	require.NoError(t, dir.WriteInfo(rundir.Info{RunID: dir.ID(), Command: "run", Mode: "cluster", NATSURL: "nats://127.0.0.1:1",
		Memory: map[string]string{"store": stores.MemorySQLite, "file": rundir.MemoryDB}}))
	require.ErrorContains(t, Purge(ctx, cfg, o), "run run-purge keeps no memory in Redis")
}
