package memorytest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/memory"
)

// testRankConfidenceAndDecay: with equal relevance, a fact seen more
// often (higher confidence) ranks above one seen once, and a fresh fact
// above one whose last sighting has decayed; each score is memory.Rank of
// the hit at the store's clock with the default half-life.
func testRankConfidenceAndDecay(t *testing.T, s memory.Store, clock *Clock) {
	ctx := context.Background()
	fork(t, s, "root", "")
	write := func(text string) {
		_, _, err := s.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: "root", Text: text})
		require.NoError(t, err)
	}
	write("alpha halo stencil tiling")
	for range 3 {
		write("bravo halo stencil tiling")
	}
	search := func() []memory.ArchivalItem {
		hits, err := s.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: "root", Query: "stencil tiling", K: 8})
		require.NoError(t, err)
		for _, h := range hits {
			require.InDelta(t, memory.Rank(h.BM25, h.LastSeen, h.Count, clock.Now(), memory.DefaultHalfLife), h.Score, 1e-9, h.Text)
		}
		return hits
	}
	hits := search()
	require.Len(t, hits, 2)
	require.Equal(t, "bravo halo stencil tiling", hits[0].Text, "three sightings: confidence 0.875 against 0.5")
	require.Equal(t, 3, hits[0].Count)

	clock.Advance(4 * memory.DefaultHalfLife)
	write("charlie halo stencil tiling")
	hits = search()
	require.Len(t, hits, 3)
	require.Equal(t, "charlie halo stencil tiling", hits[0].Text, "fresh, where the others decayed to 1/16")
	require.Greater(t, memory.Strength(1, hits[0].LastSeen, clock.Now(), memory.DefaultHalfLife),
		memory.Strength(3, clock.Now().Add(-4*memory.DefaultHalfLife), clock.Now(), memory.DefaultHalfLife))
}

// exerciseDecay: the Memory on a store with the same injected clock:
// forget_below leaves decayed facts out of searches and prompts, and the
// sweep consolidates repeated episodes into one semantic fact with their
// count, in the branch only, adding only new episodes when run again.
func exerciseDecay(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	clock := NewClock()
	s := newStore(t, clock)
	t.Cleanup(func() { _ = s.Close() })
	cfg := memory.Defaults()
	cfg.DecayHalfLifeHours = 1
	cfg.ForgetBelow = 0.1
	m := memory.New(s, cfg, memory.Options{Now: clock.Now, Logger: testutil.Logger(t)})
	for _, b := range [][2]string{{"root", ""}, {"a", "root"}, {"b", "root"}} {
		_, err := m.Fork(ctx, b[0], b[1])
		require.NoError(t, err)
	}
	_, _, err := m.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: "a", Text: "old note: the halo exchange dominates"})
	require.NoError(t, err)
	find := func(branch, q string) []string {
		hits, err := m.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: branch, Query: q})
		require.NoError(t, err)
		var out []string
		for _, h := range hits {
			out = append(out, h.Text)
		}
		return out
	}
	require.Equal(t, []string{"old note: the halo exchange dominates"}, find("a", "halo exchange"))
	clock.Advance(3 * time.Hour) // strength 0.5 * 2^-3 = 0.0625 < 0.1
	require.Empty(t, find("a", "halo exchange"), "decayed below forget_below")
	r, err := m.RenderForPrompt(ctx, "a", "halo exchange", 0)
	require.NoError(t, err)
	require.NotContains(t, r.Text, "old note", "nor in prompts")

	for i := range 3 {
		// The same episode each time; only its duration differs.
		_, err := m.RecallAppend(ctx, "a", memory.RecallEvent{Kind: "error_encountered", Phase: "compile",
			Payload: fmt.Sprintf("exit 1 in %d ms: undefined reference to omp_get_wtime", 10+i)})
		require.NoError(t, err)
	}
	_, err = m.RecallAppend(ctx, "a", memory.RecallEvent{Kind: "error_encountered", Phase: "run", Payload: "segfault once"})
	require.NoError(t, err)
	_, err = m.RecallAppend(ctx, "b", memory.RecallEvent{Kind: "error_encountered", Phase: "compile", Payload: "undefined reference to omp_get_wtime"})
	require.NoError(t, err)
	got, err := m.Consolidate(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, []memory.Consolidated{{Branch: "a", Text: "[SEMANTIC] error_encountered (compile): exit 1: undefined reference to omp_get_wtime", Episodes: 3, Added: 3}}, got)
	hits, err := m.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: "a", Query: "omp_get_wtime", Tags: []string{memory.SemanticTag}})
	require.NoError(t, err)
	require.Len(t, hits, 1)
	require.Equal(t, 3, hits[0].Count, "its confidence counts the episodes")
	require.InDelta(t, 0.875, memory.Confidence(hits[0].Count), 1e-9)
	require.Empty(t, find("b", "omp_get_wtime"), "a sibling does not see it")

	got, err = m.Consolidate(ctx, "a")
	require.NoError(t, err)
	require.Empty(t, got, "nothing new: nothing written")
	_, err = m.RecallAppend(ctx, "a", memory.RecallEvent{Kind: "error_encountered", Phase: "compile", Payload: "exit 1 in 99 ms: undefined reference to omp_get_wtime"})
	require.NoError(t, err)
	got, err = m.Consolidate(ctx, "a")
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, 1, got[0].Added)
	hits, err = m.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: "a", Query: "omp_get_wtime", Tags: []string{memory.SemanticTag}})
	require.NoError(t, err)
	require.Len(t, hits, 1)
	require.Equal(t, 4, hits[0].Count)
	require.True(t, strings.HasPrefix(hits[0].Text, "[SEMANTIC]"))
}
