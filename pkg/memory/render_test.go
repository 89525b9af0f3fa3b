package memory_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/memory"
)

type compressDouble struct {
	calls int
	fail  bool
}

func (c *compressDouble) Compress(_ context.Context, text string, target int, hint string) (string, error) {
	c.calls++
	if c.fail {
		return "", errors.New("compression model down")
	}
	return "COMPRESSED(" + hint + "): " + text[:min(len(text), target/2)], nil
}

func fill(t *testing.T, m *memory.Memory) {
	ctx := context.Background()
	for _, c := range []memory.CoreSetParams{
		{Branch: "root", Key: "IDEA_SUMMARY", Value: "optimize a 2-D heat stencil with OpenMP", Importance: 1},
		{Branch: "root", Key: "best_flags", Value: "-O3 -march=native", Importance: 5},
		{Branch: "root", Key: "trivia", Value: strings.Repeat("unimportant detail ", 30), Importance: 1},
		{Branch: "root", Key: "RESOURCE_INDEX", Value: `{"items": [{"name": "gcc", "class": "compiler", "status": "available"}]}`},
	} {
		_, err := m.CoreSet(ctx, c)
		require.NoError(t, err)
	}
	for i := range 20 {
		_, err := m.RecallAppend(ctx, "root", memory.RecallEvent{Kind: "node_result", NodeID: fmt.Sprintf("n%d", i),
			Payload: fmt.Sprintf("run %d: %d GFLOP/s with tile %d and schedule static, compiled with -O3 -fopenmp", i, 10+i, 8*i)})
		require.NoError(t, err)
	}
	for _, text := range []string{"tiling by 32 improved the stencil by 20%", "static scheduling beats dynamic for the stencil", "MPI is not needed"} {
		_, _, err := m.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: "root", Text: text})
		require.NoError(t, err)
	}
}

func TestRenderWithinBudget(t *testing.T) {
	ctx := context.Background()
	m := newMemory(t, memory.Config{}, memory.Options{})
	fill(t, m)
	r, err := m.RenderForPrompt(ctx, "root", "improve the stencil", 24000)
	require.NoError(t, err)
	require.LessOrEqual(t, len(r.Text), 24000)
	for _, want := range []string{"## Resources", `"class": "compiler"`, "## Core memory", "- IDEA_SUMMARY (importance 1)",
		"- best_flags (importance 5): -O3 -march=native", "## Recall", "run 19: 29 GFLOP/s", "## Archival memory relevant to: improve the stencil",
		"tiling by 32 improved the stencil"} {
		require.Contains(t, r.Text, want)
	}
	require.NotContains(t, r.Text, "MPI is not needed", "only hits for the hint")
	require.Less(t, strings.Index(r.Text, "IDEA_SUMMARY"), strings.Index(r.Text, "best_flags"), "pinned keys first")
	for _, s := range r.Sections {
		require.False(t, s.Truncated, s.Name)
	}
}

func TestRenderOverBudgetTruncatesVisibly(t *testing.T) {
	ctx := context.Background()
	m := newMemory(t, memory.Config{}, memory.Options{})
	fill(t, m)
	r, err := m.RenderForPrompt(ctx, "root", "stencil", 1200)
	require.NoError(t, err)
	require.LessOrEqual(t, len(r.Text), 1200)
	byName := map[string]memory.SectionInfo{}
	for _, s := range r.Sections {
		byName[s.Name] = s
		require.LessOrEqual(t, s.Chars, s.Budget, s.Name)
	}
	require.Contains(t, byName[memory.SectionCore].LeftOut, "trivia", "the lowest importance, then the oldest, goes first")
	require.NotContains(t, byName[memory.SectionCore].LeftOut, "IDEA_SUMMARY", "pinned keys go last")
	require.Contains(t, r.Text, "core entries left out for budget: trivia")
	require.True(t, byName[memory.SectionRecall].Truncated)
	require.Contains(t, r.Text, "[... truncated:")
	for _, title := range []string{"## Resources", "## Core memory", "## Recall", "## Archival"} {
		require.Contains(t, r.Text, title, "no section silently disappears")
	}

	tiny, err := m.RenderForPrompt(ctx, "root", "stencil", 400)
	require.NoError(t, err)
	require.LessOrEqual(t, len(tiny.Text), 400)
	require.Contains(t, tiny.Text, "section cut to nothing")
	for _, title := range []string{"## Resources", "## Core memory", "## Recall", "## Archival"} {
		require.Contains(t, tiny.Text, title, "no section silently disappears")
	}
	_, err = m.RenderForPrompt(ctx, "root", "stencil", 399)
	require.ErrorIs(t, err, memory.ErrInvalid)
}

func TestRenderCompressesAndCaches(t *testing.T) {
	ctx := context.Background()
	c := &compressDouble{}
	m := newMemory(t, memory.Config{}, memory.Options{Compressor: c})
	fill(t, m)
	r, err := m.RenderForPrompt(ctx, "root", "stencil", 1500)
	require.NoError(t, err)
	require.Contains(t, r.Text, "COMPRESSED(stencil)")
	require.LessOrEqual(t, len(r.Text), 1500)
	calls := c.calls
	require.Positive(t, calls)
	_, err = m.RenderForPrompt(ctx, "root", "stencil", 1500)
	require.NoError(t, err)
	require.Equal(t, calls, c.calls, "the same text, target and hint come from the cache")

	c.fail = true
	m2 := newMemory(t, memory.Config{}, memory.Options{Compressor: c})
	fill(t, m2)
	r, err = m2.RenderForPrompt(ctx, "root", "stencil", 1500)
	require.NoError(t, err, "a failing compressor falls back to truncation")
	require.Contains(t, r.Text, "[... truncated:")
	require.LessOrEqual(t, len(r.Text), 1500)
}

// TestRenderBudgetsHold: at every budget, the text fits and every section
// is there.
func TestRenderBudgetsHold(t *testing.T) {
	ctx := context.Background()
	m := newMemory(t, memory.Config{}, memory.Options{Compressor: &compressDouble{}})
	fill(t, m)
	for budget := 400; budget <= 6000; budget += 137 {
		r, err := m.RenderForPrompt(ctx, "root", "stencil tiling", budget)
		require.NoError(t, err)
		require.LessOrEqual(t, len(r.Text), budget, "budget %d", budget)
		for _, title := range []string{"## Resources", "## Core memory", "## Recall", "## Archival"} {
			require.Contains(t, r.Text, title, "budget %d", budget)
		}
	}
}
