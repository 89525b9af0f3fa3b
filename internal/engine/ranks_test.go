package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/run"
	"github.com/hpcq/hpcq/pkg/schema"
)

// TestRanksText: a run whose limits ask for ranks tells the model their
// shape and how to launch them; a run that does not says nothing of it.
func TestRanksText(t *testing.T) {
	t.Parallel()
	e := bareEngine(t, "", run.Spec{Limits: schema.Limits{Nodes: 2, RanksPerNode: 4, CPUsPerRank: 2}})
	text := e.ranksText()
	require.Contains(t, text, "spans 2 compute node(s) with 4 MPI rank(s) on each (8 in all, 2 CPU(s) a rank)")
	require.Contains(t, text, `"$HPCQ_MPIRUN ./prog args"`)
	require.Empty(t, bareEngine(t, "", run.Spec{}).ranksText())
	require.Contains(t, (bareEngine(t, "", run.Spec{Limits: schema.Limits{RanksPerNode: 2}})).ranksText(), "spans 1 compute node(s) with 2 MPI rank(s)")
}
