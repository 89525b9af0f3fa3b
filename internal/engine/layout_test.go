package engine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/prompt"
	"github.com/hpcq/hpcq/internal/run"
)

// TestReadPlanOfAnOlderRun: a run written when Phase 0's files were in
// plans/<id>/ is resumed without asking Phase 0 again; a plan in the node's
// directory is the one read when both are there.
func TestReadPlanOfAnOlderRun(t *testing.T) {
	t.Parallel()
	e := bareEngine(t, t.TempDir(), run.Spec{})
	_, err := e.readPlan("n0001")
	require.ErrorIs(t, err, os.ErrNotExist)

	old := filepath.Join(e.s.Dir, "plans", "n0001")
	require.NoError(t, os.MkdirAll(old, 0o755))
	e.files.oldPlans = hasOldPlans(e.s.Dir)
	require.True(t, e.files.oldPlans)
	require.NoError(t, os.WriteFile(filepath.Join(old, "phase0_plan.json"), []byte(`{"approach": "tiling\nmore"}`), 0o644))
	data, err := e.readPlan("n0001")
	require.NoError(t, err)
	require.JSONEq(t, `{"approach": "tiling\nmore"}`, string(data))
	require.Equal(t, "tiling", e.approach("n0001"))

	now := filepath.Join(e.s.Dir, "nodes", "n0001")
	require.NoError(t, os.MkdirAll(now, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(now, "phase0_plan.json"), []byte(`{"approach": "blocking"}`), 0o644))
	data, err = e.readPlan("n0001")
	require.NoError(t, err)
	require.JSONEq(t, `{"approach": "blocking"}`, string(data))
}

// TestPhase0Given: phase0_history_full.json is what json.MarshalIndent
// wrote for the map of the four texts, byte for byte.
func TestPhase0Given(t *testing.T) {
	t.Parallel()
	for _, pc := range []prompt.Context{
		{},
		{History: "n0001 draft: 5\nn0002 <improve> \"quoted\" & \\ \t tab", Environment: "gcc 12\u2028", Memory: "é ü \x01 </script>", Resources: "{}"},
		{History: strings.Repeat("line\n", 1000), Memory: "\xff invalid utf-8"},
	} {
		want, err := json.MarshalIndent(map[string]string{"history": pc.History, "environment": pc.Environment, "resources": pc.Resources,
			"memory": pc.Memory}, "", "  ")
		require.NoError(t, err)
		require.Equal(t, string(append(want, '\n')), string(appendPhase0Given(nil, pc)))
	}
}
