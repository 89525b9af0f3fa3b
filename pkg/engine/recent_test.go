package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/schema"
)

func TestRecentKeepsTheLastPut(t *testing.T) {
	r := recent[int]{limit: 3}
	for i := range 5 {
		r.put(fmt.Sprint(i), &i)
	}
	for i := range 5 {
		v, ok := r.get(fmt.Sprint(i))
		require.Equal(t, i >= 2, ok, "%d", i)
		if ok {
			require.Equal(t, i, *v)
		}
	}
	seven := 7
	r.put("3", &seven) // replaced in place: nothing else goes
	v, ok := r.get("3")
	require.True(t, ok)
	require.Equal(t, 7, *v)
	_, ok = r.get("2")
	require.True(t, ok)
}

// TestNodeFilesKept: what the engine writes of a node is read back from
// memory, what it did not write from the node's files, and a node without
// them has none.
func TestNodeFilesKept(t *testing.T) {
	e := &engine{dir: t.TempDir()}
	require.NoError(t, os.MkdirAll(filepath.Join(e.dir, nodesDir, "n1"), 0o755))
	require.NoError(t, e.saveTask("n1", &schema.NodeTask{NodeID: "n1"}))
	require.NoError(t, e.saveOutcome("n1", &outcome{Node: "n1", Summary: "ran"}))
	// Changed on disk behind the engine's back: the kept copy is served.
	require.NoError(t, os.WriteFile(filepath.Join(e.dir, nodesDir, "n1", outcomeFile), []byte(`{"node":"n1","summary":"edited"}`), 0o644))
	o, ok, err := e.nodeOutcome("n1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "ran", o.Summary)
	tk, ok, err := e.nodeTask("n1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "n1", tk.NodeID)

	fresh := &engine{dir: e.dir} // another process: read from the files
	o, ok, err = fresh.nodeOutcome("n1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "edited", o.Summary)
	_, ok, err = fresh.nodeTask("n2")
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, os.MkdirAll(filepath.Join(e.dir, nodesDir, "n3"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(e.dir, nodesDir, "n3", outcomeFile), []byte(`{`), 0o644))
	_, _, err = fresh.nodeOutcome("n3")
	require.ErrorContains(t, err, outcomeFile)
}
