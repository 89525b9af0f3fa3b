package engine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/fileio"
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
		nd := filepath.Join(dir, nodesDir, id)
		require.NoError(t, os.MkdirAll(nd, 0o755))
		if result != "" {
			require.NoError(t, fileio.WriteFileAtomic(filepath.Join(nd, outcomeFile), []byte(result)))
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
	require.NoError(t, os.Remove(filepath.Join(dir, nodesDir, "n0003", outcomeFile)))
	s, err = ReadSnapshot(dir)
	require.NoError(t, err)
	require.Equal(t, []int{3, 2, 0, 0}, []int{s.Nodes, s.Done, s.Buggy, s.Cached})
	require.Equal(t, "n0001", s.Best)
}
