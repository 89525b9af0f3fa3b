package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/memory/memorytest"
	"github.com/hpcq/hpcq/pkg/memory/sqlite"
)

func TestConformance(t *testing.T) {
	memorytest.Exercise(t, func(t *testing.T, clock *memorytest.Clock) memory.Store {
		s, err := sqlite.Open(filepath.Join(t.TempDir(), "memory.sqlite"), sqlite.Options{Now: clock.Now})
		require.NoError(t, err)
		return s
	})
}

// TestReopen: everything survives a reopen, the archival index included.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memory.sqlite")
	s, err := sqlite.Open(path, sqlite.Options{})
	require.NoError(t, err)
	_, err = s.Fork(ctx, memory.ForkParams{Branch: "root"})
	require.NoError(t, err)
	_, err = s.Fork(ctx, memory.ForkParams{Branch: "child", Parent: "root"})
	require.NoError(t, err)
	_, _, err = s.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: "child", Text: "vectorize the inner loop", Tags: []string{"insight"}})
	require.NoError(t, err)
	_, err = s.CoreSet(ctx, memory.CoreSetParams{Branch: "root", Key: "k", Value: "v"})
	require.NoError(t, err)
	_, err = s.RecallAppend(ctx, memory.RecallAppendParams{Branch: "child", Event: memory.RecallEvent{Kind: "compile_failed", Payload: "undefined reference"}})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s, err = sqlite.Open(path, sqlite.Options{})
	require.NoError(t, err)
	defer s.Close()
	hits, err := s.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: "child", Query: "vectorize", Tags: []string{"insight"}})
	require.NoError(t, err)
	require.Len(t, hits, 1)
	hits, err = s.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: "root", Query: "vectorize"})
	require.NoError(t, err)
	require.Empty(t, hits)
	evs, err := s.RecallSearch(ctx, memory.RecallSearchParams{Branch: "child", Query: "undefined"})
	require.NoError(t, err)
	require.Len(t, evs, 1, "the recall index is rebuilt at open")
	e, ok, err := s.CoreGet(ctx, memory.CoreKeyParams{Branch: "child", Key: "k"})
	require.NoError(t, err)
	require.False(t, ok, "written in the root after the child's fork")
	_ = e
	_, _, err = s.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: "child", Text: "Vectorize  the inner loop"})
	require.NoError(t, err)
	hits, err = s.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: "child", Query: "vectorize"})
	require.NoError(t, err)
	require.Equal(t, 2, hits[0].Count, "dedup across a reopen")
}

// TestOneWriterProcess: a second Open of the same file is refused while
// the first is open, and allowed after it closes.
func TestOneWriterProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.sqlite")
	s, err := sqlite.Open(path, sqlite.Options{})
	require.NoError(t, err)
	_, err = sqlite.Open(path, sqlite.Options{})
	require.ErrorIs(t, err, sqlite.ErrLocked)
	require.NoError(t, s.Close())
	s, err = sqlite.Open(path, sqlite.Options{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
}
