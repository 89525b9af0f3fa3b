package schema_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/schema"
)

// TestUnfinished: the one test of whether a node has ended, for every
// status word a node has.
func TestUnfinished(t *testing.T) {
	t.Parallel()
	for status, want := range map[string]bool{
		schema.NodePreparing: true, schema.NodeQueued: true, schema.NodeDeclined: true, schema.NodeRunning: true,
		schema.NodeOK: false, schema.NodeFailed: false, schema.NodeNotRun: false, schema.NodeCached: false,
		schema.NodeDeadLettered: false, schema.NodeNoAnswer: false, schema.NodeCanceled: false, "": false,
	} {
		require.Equal(t, want, schema.Unfinished(status), status)
	}
	require.True(t, schema.Waiting(schema.NodeQueued))
	require.True(t, schema.Waiting(schema.NodeDeclined))
	require.False(t, schema.Waiting(schema.NodeRunning), "a worker has it")
	require.False(t, schema.Waiting(schema.NodePreparing), "not published yet")
}
