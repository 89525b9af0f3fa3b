package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/run"
	"github.com/hpcq/hpcq/internal/tree"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

func TestRecentKeepsTheLastPut(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	e := bareEngine(t, t.TempDir(), run.Spec{})
	require.NoError(t, os.MkdirAll(filepath.Join(e.s.Dir, nodesDir, "n1"), 0o755))
	require.NoError(t, e.files.saveTask("n1", &schema.NodeTask{NodeID: "n1"}))
	require.NoError(t, e.saveOutcome("n1", &rundir.Outcome{Node: "n1", Summary: "ran"}))
	// Changed on disk behind the engine's back: the kept copy is served.
	require.NoError(t, os.WriteFile(filepath.Join(e.s.Dir, nodesDir, "n1", outcomeFile), []byte(`{"node":"n1","summary":"edited"}`), 0o644))
	o, ok, err := e.files.outcome("n1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "ran", o.Summary)
	tk, ok, err := e.files.task("n1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "n1", tk.NodeID)

	fresh := bareEngine(t, e.s.Dir, run.Spec{}) // another process: read from the files
	o, ok, err = fresh.files.outcome("n1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "edited", o.Summary)
	_, ok, err = fresh.files.task("n2")
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, os.MkdirAll(filepath.Join(e.s.Dir, nodesDir, "n3"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(e.s.Dir, nodesDir, "n3", outcomeFile), []byte(`{`), 0o644))
	_, _, err = fresh.files.outcome("n3")
	require.ErrorContains(t, err, outcomeFile)
}

// TestFreshNodeFiles: a node whose directory this process made has no
// outcome and no approach until the engine writes them, whatever is put
// on disk behind its back; once its outcome is saved it is read as any
// other node's, from memory or from its file. A node whose directory was
// there before (a resumed run) is read from its files.
func TestFreshNodeFiles(t *testing.T) {
	t.Parallel()
	e := bareEngine(t, t.TempDir(), run.Spec{})
	require.NoError(t, os.MkdirAll(filepath.Join(e.s.Dir, nodesDir), 0o755))
	dir := filepath.Join(e.s.Dir, nodesDir, "n1")
	fresh, err := makeNodeDir(dir)
	require.NoError(t, err)
	require.True(t, fresh)
	e.own.Store("n1", ownNode{})

	// Files no process of this run wrote (a stale copy) are not looked at.
	require.NoError(t, os.WriteFile(filepath.Join(dir, outcomeFile), []byte(`{"node":"n1","summary":"stale"}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, planFile), []byte(`{"approach":"stale"}`), 0o644))
	_, ok, err := e.files.outcome("n1")
	require.NoError(t, err)
	require.False(t, ok, "a running node has no outcome")
	require.Equal(t, "", e.approach("n1"), "no approach before Phase 0 keeps it")
	require.Equal(t, "running", e.nodeSummary(tree.Node{ID: "n1"}), "a running node's line")
	e.texts.approaches.Store("n1", "tile the loops")
	require.Equal(t, "tile the loops; running", e.nodeSummary(tree.Node{ID: "n1"}))

	require.NoError(t, e.saveOutcome("n1", &rundir.Outcome{Node: "n1", Summary: "it ran\nin detail"}))
	o, ok, err := e.files.outcome("n1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "it ran\nin detail", o.Summary)
	require.False(t, e.isUnwritten("n1"), "saved: no longer unwritten")
	require.Equal(t, "it ran; ok", e.nodeSummary(tree.Node{ID: "n1", Done: true}), "a finished node's line: its summary")
	e.files.outcomes = recent[rundir.Outcome]{} // forgotten: read back from the file the engine wrote
	o, ok, err = e.files.outcome("n1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "it ran\nin detail", o.Summary)

	// Made before: not fresh, and its files are read.
	fresh, err = makeNodeDir(dir)
	require.NoError(t, err)
	require.False(t, fresh)
	// Under a nodes/ directory that is gone, it is made again (not fresh:
	// the engine then looks, as for any node it did not make).
	require.NoError(t, os.RemoveAll(filepath.Join(e.s.Dir, nodesDir)))
	fresh, err = makeNodeDir(dir)
	require.NoError(t, err)
	require.False(t, fresh)
	require.DirExists(t, dir)
}

// TestEndedFromCache: the nodes this process ended are counted from what
// it kept; those ended before it (a resumed run) from their result.json.
func TestEndedFromCache(t *testing.T) {
	t.Parallel()
	e := bareEngine(t, t.TempDir(), run.Spec{})
	for id, cached := range map[string]bool{"n1": true, "n2": false} {
		require.NoError(t, os.MkdirAll(filepath.Join(e.s.Dir, nodesDir, id), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(e.s.Dir, nodesDir, id, outcomeFile), fmt.Appendf(nil, `{"node":%q,"cached":%t}`, id, cached), 0o644))
	}
	require.True(t, e.endedFromCache("n1"), "ended before: read from its file")
	require.False(t, e.endedFromCache("n2"))
	require.False(t, e.endedFromCache("n3"), "no outcome: not from the cache")
	e.own.Store("n2", ownNode{ended: true, cached: true}) // ended here, from the cache
	require.True(t, e.endedFromCache("n2"))
}
