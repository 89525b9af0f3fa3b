package runview

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/fileio"
	"github.com/hpcq/hpcq/internal/search"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/internal/tree"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// TestSnapshotFollowsTheFiles: a snapshot counts the results as the files
// now are, also when it is read again after they changed.
func TestSnapshotFollowsTheFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run-snap")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, rundir.SpecFile), []byte(`{"title":"t","metric":{"name":"score","direction":"maximize"}}`), 0o644))
	put := func(id, result string) {
		t.Helper()
		nd := filepath.Join(dir, rundir.NodesDir, id)
		require.NoError(t, os.MkdirAll(nd, 0o755))
		if result != "" {
			require.NoError(t, fileio.WriteFileAtomic(filepath.Join(nd, rundir.ResultFile), []byte(result)))
		}
	}
	put("n0001", `{"node":"n0001","metric":2}`)
	put("n0002", `{"node":"n0002","buggy":true}`)
	put("n0003", "")
	s, err := ReadSnapshot(dir)
	require.NoError(t, err)
	require.Equal(t, []int{3, 2, 1, 0}, []int{s.Nodes, s.Done, s.Buggy, s.Cached})
	require.Equal(t, "n0001", s.Best)
	require.Equal(t, 2.0, *s.Value)

	put("n0003", `{"node":"n0003","metric":5,"cached":true}`)
	put("n0002", `{"node":"n0002","metric":1}`)
	s, err = ReadSnapshot(dir)
	require.NoError(t, err)
	require.Equal(t, []int{3, 3, 0, 1}, []int{s.Nodes, s.Done, s.Buggy, s.Cached})
	require.Equal(t, "n0003", s.Best)
	require.Equal(t, 5.0, *s.Value)
	require.NoError(t, os.Remove(filepath.Join(dir, rundir.NodesDir, "n0003", rundir.ResultFile)))
	s, err = ReadSnapshot(dir)
	require.NoError(t, err)
	require.Equal(t, []int{3, 2, 0, 0}, []int{s.Nodes, s.Done, s.Buggy, s.Cached})
	require.Equal(t, "n0001", s.Best)
}

// TestSnapshotKeepsEndedNodes: what was read of a node the tree journal
// says ended is not looked at again (its files are final); a journal
// written anew drops it.
func TestSnapshotKeepsEndedNodes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run-kept")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, rundir.JournalDir), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, rundir.SpecFile), []byte(`{"title":"t","metric":{"name":"score","direction":"maximize"}}`), 0o644))
	journal := filepath.Join(dir, rundir.TreeJournal)
	tr, err := search.OpenTree(journal)
	require.NoError(t, err)
	var failed atomic.Value
	// As the engine does: the outcome written before the journal records the end.
	runner := search.RunnerFunc(func(_ context.Context, n *tree.Node) (search.Result, error) {
		nd := filepath.Join(dir, rundir.NodesDir, n.ID)
		if err := errors.Join(os.MkdirAll(nd, 0o755), fileio.WriteFileAtomic(filepath.Join(nd, rundir.ResultFile), []byte(`{"metric":1}`))); err != nil {
			failed.Store(err)
		}
		return search.Result{Metric: 1, HasMetric: true}, nil
	})
	search.Run(context.Background(), tr, search.Policy{NumDrafts: 2, Maximize: true}, runner, 1, 4, search.Lockstep)
	require.NoError(t, tr.Close())
	require.Nil(t, failed.Load())
	s, err := ReadSnapshot(dir)
	require.NoError(t, err)
	require.Equal(t, []int{4, 4, 0}, []int{s.Nodes, s.Done, s.Buggy})
	require.Equal(t, "n0001", s.Best, "a tie goes to the node made first")

	// Written again in place (the engine never does): not looked at.
	require.NoError(t, os.WriteFile(filepath.Join(dir, rundir.NodesDir, "n0001", rundir.ResultFile), []byte(`{"buggy":true}`), 0o644))
	s, err = ReadSnapshot(dir)
	require.NoError(t, err)
	require.Equal(t, 0, s.Buggy)
	// The journal replaced by another file: read again.
	testutil.ReplaceWithCopy(t, journal)
	s, err = ReadSnapshot(dir)
	require.NoError(t, err)
	require.Equal(t, 1, s.Buggy)
	require.Equal(t, "n0002", s.Best)
}
