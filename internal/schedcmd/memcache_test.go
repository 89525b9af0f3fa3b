package schedcmd

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/stores"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/memory/sqlite"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// TestMemoryCache: the dashboard's memory of a run is opened once while its
// files stay as they were, beside the run's own writer (no lock taken);
// once the writer changed them it is opened again and shows the change,
// and the store it replaced is closed when its last request is done.
func TestMemoryCache(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "run-mem")
	d := rundir.Dir(dir)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "memory"), 0o755))
	where := map[string]string{"store": stores.MemorySQLite}
	require.NoError(t, d.WriteInfo(rundir.Info{RunID: "run-mem", Command: "run", Mode: "local", Memory: where}))
	w, err := sqlite.Open(stores.MemoryFile(d, where), sqlite.Options{Run: "run-mem"})
	require.NoError(t, err)
	defer w.Close()
	_, err = w.Fork(ctx, memory.ForkParams{Branch: "root"})
	require.NoError(t, err)
	set := func(v string) {
		t.Helper()
		_, err := w.CoreSet(ctx, memory.CoreSetParams{Branch: "root", Key: "k", Value: v})
		require.NoError(t, err)
		require.NoError(t, w.Flush(ctx))
	}
	get := func(st memory.Store) string {
		t.Helper()
		e, _, err := st.CoreGet(ctx, memory.CoreKeyParams{Branch: "root", Key: "k"})
		require.NoError(t, err)
		return e.Value
	}
	set("one")

	c := newMemoryCache(&config.Scheduler{}, slog.New(slog.DiscardHandler))
	closed := map[memory.Store]bool{}
	open := c.open
	c.open = func(ctx context.Context, dir rundir.Dir, where map[string]string) (memory.Store, error) {
		st, err := open(ctx, dir, where)
		if err != nil {
			return nil, err
		}
		return &closeSpy{Store: st, closed: closed}, nil
	}
	a, doneA, err := c.get(ctx, dir)
	require.NoError(t, err, "beside the writer")
	require.Equal(t, "one", get(a))
	b, doneB, err := c.get(ctx, dir)
	require.NoError(t, err)
	require.Same(t, a, b, "files unchanged: the same store")
	doneB()
	doneB() // twice: counted once

	set("two")
	n, doneN, err := c.get(ctx, dir)
	require.NoError(t, err)
	require.NotSame(t, a, n, "files changed: opened again")
	require.Equal(t, "two", get(n))
	require.Equal(t, "one", get(a), "still open for the request using it")
	require.False(t, closed[a])
	doneA()
	require.True(t, closed[a], "closed once its last request was done")
	require.False(t, closed[n])
	doneN()
	require.False(t, closed[n], "kept while the files stay as they are")
	c.closeAll()
	require.True(t, closed[n], "closed with the cache")
}

// closeSpy notes that its store was closed (the test's goroutine only).
type closeSpy struct {
	memory.Store
	closed map[memory.Store]bool
}

func (s *closeSpy) Close() error {
	s.closed[s] = true
	return s.Store.Close()
}
