package runview

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestListNodesSeesChanges: what ListNodes keeps of a node's files is
// read again when a file is replaced (as the engine writes it: a rename),
// appears, goes, or is written again in place.
func TestListNodesSeesChanges(t *testing.T) {
	dir := t.TempDir()
	nd := filepath.Join(dir, "nodes", "n0001")
	require.NoError(t, os.MkdirAll(nd, 0o755))
	put := func(name, content string) {
		t.Helper()
		tmp := filepath.Join(nd, name+".tmp")
		require.NoError(t, os.WriteFile(tmp, []byte(content), 0o644))
		require.NoError(t, os.Rename(tmp, filepath.Join(nd, name)))
	}
	one := func() NodeLine {
		t.Helper()
		lines, err := ListNodes(dir)
		require.NoError(t, err)
		require.Len(t, lines, 1)
		return lines[0]
	}
	require.Equal(t, Preparing, one().Status)
	put("task.json", `{"node_id":"n0001","attempt":1,"kind":"draft","stage":1}`)
	require.Equal(t, NodeLine{Node: "n0001", Status: Queued, Attempt: 1, Kind: "draft", Stage: 1}, one())
	put("result.json", `{"buggy":false,"metric":2.5}`)
	l := one()
	require.Equal(t, "ok", l.Status)
	require.Equal(t, "2.5", l.Metric)
	put("result.json", `{"buggy":true,"reason":"no metric"}`) // same size or not: a new file
	l = one()
	require.Equal(t, "failed", l.Status)
	require.Empty(t, l.Metric)
	require.Nil(t, l.Value)
	require.Equal(t, "no metric", l.Reason)
	// Written in place, longer: read again.
	require.NoError(t, os.WriteFile(filepath.Join(nd, "result.json"), []byte(`{"buggy":false,"metric":3.25, "reason":""}`), 0o644))
	require.Equal(t, "3.25", one().Metric)
	require.NoError(t, os.Remove(filepath.Join(nd, "result.json")))
	require.Equal(t, Queued, one().Status)
	require.NoError(t, os.WriteFile(filepath.Join(nd, "result.json"), []byte(`{`), 0o644))
	_, err := ListNodes(dir)
	require.ErrorContains(t, err, "result.json")
}
