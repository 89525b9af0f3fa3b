package search

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/tree"
)

// TestTreeFollower: a follower reads a journal as the search appends to
// it, giving what reading it whole gives at every step: new nodes, nodes
// that ended, a torn record at the end (read once whole), a journal
// replaced by another file.
func TestTreeFollower(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tr.journal")
	follow := tree.Follow(path)
	_, _, err := follow.Update()
	require.ErrorIs(t, err, os.ErrNotExist)

	var file uint64
	same := func() []tree.Node {
		t.Helper()
		got, f, err := follow.Update()
		require.NoError(t, err)
		whole, err := ReadTree(path)
		require.NoError(t, err)
		require.Equal(t, whole.Nodes(), got)
		file = f
		return got
	}
	tr, err := OpenTree(path)
	require.NoError(t, err)
	f := &fake{sleep: func(*tree.Node) time.Duration { return time.Millisecond }}
	Run(context.Background(), tr, policy(), f, 2, 5, Async)
	require.Len(t, same(), 5)
	// A node created, not ended; then ended.
	tr.mu.Lock()
	n, _ := tr.next(&Policy{NumDrafts: 10})
	tr.mu.Unlock()
	nodes := same()
	require.Len(t, nodes, 6)
	require.False(t, nodes[5].Done)
	Run(context.Background(), tr, policy(), f, 2, 9, Async)
	nodes = same()
	require.Len(t, nodes, 9)
	got, ok := tr.Get(n.ID)
	require.True(t, ok)
	require.True(t, got.Done)
	require.NoError(t, tr.Close())

	// Half a record at the end (a write under way): not read yet.
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	fd, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = fd.Write(data[:6])
	require.NoError(t, err)
	require.NoError(t, fd.Close())
	require.Len(t, same(), 9)
	require.Equal(t, uint64(1), file)

	// Another journal in its place: read from its start.
	other := filepath.Join(t.TempDir(), "tr.journal")
	tr, err = OpenTree(other)
	require.NoError(t, err)
	Run(context.Background(), tr, policy(), f, 2, 3, Async)
	require.NoError(t, tr.Close())
	require.NoError(t, os.Rename(other, path))
	require.Len(t, same(), 3)
	require.Equal(t, uint64(2), file, "another file")
}
