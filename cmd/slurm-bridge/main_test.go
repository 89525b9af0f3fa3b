package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/bridge"
)

// TestLastErrorOneLine: a multi-line sbatch error stays on its pool's row.
func TestLastErrorOneLine(t *testing.T) {
	st := bridge.PoolStatus{Paused: true, PausedReason: "sbatch: error: invalid partition\n\tspecified: nope\n",
		LastError: "sbatch: error: Batch job submission failed:\nInvalid partition name specified"}
	require.Equal(t, "sbatch: error: invalid partition specified: nope; since: sbatch: error: Batch job submission failed: Invalid partition name specified",
		lastError(st))
	require.Equal(t, "no allocation queue serves this pool", lastError(bridge.PoolStatus{NoQueue: true, LastError: "x"}))
	require.Equal(t, "stale: no longer in the configuration (--clear-stale removes it)", lastError(bridge.PoolStatus{Stale: true}))
}
