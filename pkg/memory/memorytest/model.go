package memorytest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/memory"
)

// NewMemory returns a Memory on a fresh store, with a root branch "root".
type NewMemory func(t *testing.T, cfg memory.Config, opts memory.Options) *memory.Memory

// ExerciseModel runs the cases of the model on top of a store: the
// <memory_update> protocol, recall folding, redaction, rendering, export
// and resources. Every backend runs them through Exercise.
func ExerciseModel(t *testing.T, newStore NewStore) {
	newMemory := func(t *testing.T, cfg memory.Config, opts memory.Options) *memory.Memory {
		t.Helper()
		s := newStore(t, NewClock())
		t.Cleanup(func() { _ = s.Close() })
		if opts.Logger == nil {
			opts.Logger = testutil.Logger(t)
		}
		m := memory.New(s, cfg, opts)
		_, err := m.Fork(context.Background(), "root", "")
		require.NoError(t, err)
		return m
	}
	cases := []struct {
		name string
		fn   func(t *testing.T, newMemory NewMemory)
	}{
		{"RenderSectionBudgets", modelRenderSectionBudgets},
		{"ApplyIsAtomic", modelApplyIsAtomic},
		{"ConverseReadRounds", modelConverseReadRounds},
		{"RecallFoldAndFallback", modelRecallFoldAndFallback},
		{"SecretsRedactedBeforeStorage", modelSecretsRedactedBeforeStorage},
		{"RedactionCanBeTurnedOff", modelRedactionCanBeTurnedOff},
		{"RenderWithinBudget", modelRenderWithinBudget},
		{"RenderOverBudgetTruncatesVisibly", modelRenderOverBudgetTruncatesVisibly},
		{"RenderCompressesAndCaches", modelRenderCompressesAndCaches},
		{"RenderBudgetsHold", modelRenderBudgetsHold},
		{"RenderLowersDetailToFit", modelRenderLowersDetailToFit},
		{"Export", modelExport},
		{"Resources", modelResources},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, newMemory)
		})
	}
}

func modelApplyIsAtomic(t *testing.T, newMemory NewMemory) {
	ctx := context.Background()
	m := newMemory(t, memory.Config{}, memory.Options{})
	err := m.Store().Apply(ctx, memory.ApplyParams{Branch: "root",
		CoreSets: []memory.CoreSetParams{{Key: "a", Value: "1"}, {Key: "b", Value: "2", Importance: 9}},
		Archival: []memory.ArchivalWriteParams{{Text: "should not land"}}})
	require.ErrorIs(t, err, memory.ErrInvalid)
	_, ok, err := m.CoreGet(ctx, "root", "a")
	require.NoError(t, err)
	require.False(t, ok, "nothing of a rejected batch is applied")
	hits, err := m.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: "root", Query: "land"})
	require.NoError(t, err)
	require.Empty(t, hits)
}

func modelConverseReadRounds(t *testing.T, newMemory NewMemory) {
	ctx := context.Background()
	var calls bytes.Buffer
	m := newMemory(t, memory.Config{MaxMemoryReadRounds: 2}, memory.Options{Calls: &calls})
	_, _, err := m.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: "root", Text: "tile size 32 beats 64 on this CPU", Tags: []string{"insight"}})
	require.NoError(t, err)

	first := `<memory_update>{"core": {"stage": "improve"}, "archival_search": {"query": "tile size"}, "core_get": ["stage", "missing"]}</memory_update>`
	var seen []string
	payload, err := m.Converse(ctx, "root", first, true, func(ctx context.Context, results string) (string, error) {
		seen = append(seen, results)
		return `<memory_update>{"archival": [{"text": "use tile 32"}]}</memory_update>{"phase_artifacts": {}}`, nil
	})
	require.NoError(t, err)
	require.Equal(t, `{"phase_artifacts": {}}`, payload)
	require.Len(t, seen, 1)
	require.True(t, strings.HasPrefix(seen[0], "<memory_results>\n"))
	var r memory.Results
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSuffix(strings.TrimPrefix(seen[0], "<memory_results>\n"), "\n</memory_results>")), &r))
	require.Equal(t, "improve", *r.Core["stage"], "the block's own writes are visible to its reads")
	require.Nil(t, r.Core["missing"])
	require.Equal(t, "tile size 32 beats 64 on this CPU", r.ArchivalSearch[0].Text)
	hits, err := m.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: "root", Query: "tile"})
	require.NoError(t, err)
	require.Len(t, hits, 2)

	// A model that keeps asking is cut off after max_memory_read_rounds.
	asking := `<memory_update>{"core_get": ["stage"]}</memory_update>{}`
	n := 0
	_, err = m.Converse(ctx, "root", asking, true, func(context.Context, string) (string, error) { n++; return asking, nil })
	require.ErrorIs(t, err, memory.ErrReadRounds)
	require.Equal(t, 2, n)

	_, err = m.Converse(ctx, "root", `{"no": "block"}`, true, nil)
	require.ErrorIs(t, err, memory.ErrMissingUpdate)

	ops := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(calls.String()), "\n") {
		var c struct{ Op, Branch string }
		require.NoError(t, json.Unmarshal([]byte(line), &c))
		require.Equal(t, "root", c.Branch)
		ops[c.Op]++
	}
	for _, op := range []string{"archival_write", "memory_update_writes", "core_get", "archival_search"} {
		require.Positive(t, ops[op], op)
	}
}

type foldDouble struct {
	fail  bool
	calls int
}

func (f *foldDouble) Summarize(_ context.Context, summary string, ev memory.RecallEvent) (string, error) {
	f.calls++
	if f.fail {
		return "", errors.New("llm unavailable")
	}
	return strings.TrimSpace(summary + " " + ev.Payload), nil
}

func modelRecallFoldAndFallback(t *testing.T, newMemory NewMemory) {
	ctx := context.Background()
	sum := &foldDouble{}
	m := newMemory(t, memory.Config{RecallMaxEvents: 3}, memory.Options{Summarizer: sum})
	for i := range 5 {
		_, err := m.RecallAppend(ctx, "root", memory.RecallEvent{Kind: "node_result", Payload: fmt.Sprintf("e%d", i)})
		require.NoError(t, err)
	}
	s, window, err := m.RecallWindow(ctx, "root")
	require.NoError(t, err)
	require.Equal(t, "e0 e1", s.Text)
	require.Len(t, window, 3)
	require.Equal(t, "e2", window[0].Payload)

	// A child inherits the summary of its fork and folds on its own.
	_, err = m.Fork(ctx, "child", "root")
	require.NoError(t, err)
	_, err = m.RecallAppend(ctx, "child", memory.RecallEvent{Kind: "node_result", Payload: "c0"})
	require.NoError(t, err)
	s, _, err = m.RecallWindow(ctx, "child")
	require.NoError(t, err)
	require.Equal(t, "e0 e1 e2", s.Text)
	s, _, err = m.RecallWindow(ctx, "root")
	require.NoError(t, err)
	require.Equal(t, "e0 e1", s.Text, "the child's fold does not reach the parent")

	// The summarizer fails: nothing changes, the event stays unfolded.
	sum.fail = true
	_, err = m.RecallAppend(ctx, "root", memory.RecallEvent{Kind: "node_result", Payload: "e5"})
	require.NoError(t, err)
	s, _, err = m.RecallWindow(ctx, "root")
	require.NoError(t, err)
	require.Equal(t, "e0 e1", s.Text)
	sum.fail = false
	_, err = m.RecallAppend(ctx, "root", memory.RecallEvent{Kind: "node_result", Payload: "e6"})
	require.NoError(t, err)
	s, _, err = m.RecallWindow(ctx, "root")
	require.NoError(t, err)
	require.Equal(t, "e0 e1 e2 e3", s.Text, "the backlog is folded once the summarizer is back")
}

func modelSecretsRedactedBeforeStorage(t *testing.T, newMemory NewMemory) {
	ctx := context.Background()
	m := newMemory(t, memory.Config{}, memory.Options{}) // redaction is on by default
	_, err := m.CoreSet(ctx, memory.CoreSetParams{Branch: "root", Key: "env", Value: "OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwx"})
	require.NoError(t, err)
	e, _, err := m.CoreGet(ctx, "root", "env")
	require.NoError(t, err)
	require.Equal(t, "OPENAI_API_KEY=[REDACTED]", e.Value)
	_, err = m.Converse(ctx, "root", `<memory_update>{"archival": [{"text": "login with password=hunter2 worked"}]}</memory_update>`, true, nil)
	require.NoError(t, err)
	hits, err := m.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: "root", Query: "login"})
	require.NoError(t, err)
	require.Equal(t, "login with password=[REDACTED] worked", hits[0].Text)
	ev, err := m.RecallAppend(ctx, "root", memory.RecallEvent{Kind: "run_failed", Payload: "Authorization: Bearer abcdefghijklmnop"})
	require.NoError(t, err)
	require.Equal(t, "Authorization: Bearer [REDACTED]", ev.Payload)
}

func modelRedactionCanBeTurnedOff(t *testing.T, newMemory NewMemory) {
	ctx := context.Background()
	m := newMemory(t, memory.Config{RedactSecrets: memory.Bool(false)}, memory.Options{})
	_, err := m.CoreSet(ctx, memory.CoreSetParams{Branch: "root", Key: "k", Value: "password=hunter2"})
	require.NoError(t, err)
	e, _, err := m.CoreGet(ctx, "root", "k")
	require.NoError(t, err)
	require.Equal(t, "password=hunter2", e.Value)
}

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

func modelRenderWithinBudget(t *testing.T, newMemory NewMemory) {
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

func modelRenderOverBudgetTruncatesVisibly(t *testing.T, newMemory NewMemory) {
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
	require.Regexp(t, "## Archival memory relevant to: stencil\n- #[0-9a-f]{6} ", tiny.Text, "the archival hits at L0 (short hash and title) rather than cut")
	for _, title := range []string{"## Resources", "## Core memory", "## Recall", "## Archival"} {
		require.Contains(t, tiny.Text, title, "no section silently disappears")
	}
	_, err = m.RenderForPrompt(ctx, "root", "stencil", 399)
	require.ErrorIs(t, err, memory.ErrInvalid)
}

func modelRenderCompressesAndCaches(t *testing.T, newMemory NewMemory) {
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
func modelRenderBudgetsHold(t *testing.T, newMemory NewMemory) {
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

func modelExport(t *testing.T, newMemory NewMemory) {
	ctx := context.Background()
	m := newMemory(t, memory.Config{}, memory.Options{})
	set := func(branch, k, v string) {
		_, err := m.CoreSet(ctx, memory.CoreSetParams{Branch: branch, Key: k, Value: v})
		require.NoError(t, err)
	}
	ev := func(branch, kind, phase, payload string) {
		_, err := m.RecallAppend(ctx, branch, memory.RecallEvent{Kind: kind, NodeID: branch, Phase: phase, Payload: payload})
		require.NoError(t, err)
	}
	set("root", "IDEA_SUMMARY", "speed up a heat stencil")
	set("root", "PHASE0_SUMMARY", "try OpenMP, then tiling")
	set("root", "RESOURCE_INDEX", `{"items":[{"name":"gcc","status":"available"}]}`)
	ev("root", "node_created", "", "draft")
	_, err := m.Fork(ctx, "good", "root")
	require.NoError(t, err)
	_, err = m.Fork(ctx, "bad", "root")
	require.NoError(t, err)
	ev("bad", "node_result", "run", "sibling result that must not appear")
	ev("good", "compile_failed", "compile", "undefined reference to omp_get_wtime")
	ev("good", "compile_complete", "compile", "added -fopenmp")
	ev("good", "node_result", "run", "gflops=12.5")
	ev("good", "run_failed", "run", "segfault at n=4096")

	dir := t.TempDir()
	e, err := m.Export(ctx, memory.ExportParams{Root: "root", Best: "good", Dir: dir})
	require.NoError(t, err)
	require.Equal(t, []string{"root", "good"}, e.Path)
	require.Equal(t, "speed up a heat stencil", e.IdeaSummary)
	require.Equal(t, "try OpenMP, then tiling", e.Phase0Summary)
	require.Len(t, e.Decisions, 5)
	require.Len(t, e.Results, 1)
	require.Equal(t, "gflops=12.5", e.Results[0].Payload)
	require.Len(t, e.Errors, 2)
	require.Equal(t, "added -fopenmp", e.Errors[0].FixedBy.Payload)
	require.Nil(t, e.Errors[1].FixedBy)

	md, err := os.ReadFile(filepath.Join(dir, memory.ExportMarkdown))
	require.NoError(t, err)
	for _, want := range []string{"# Final memory: branch good", "root -> good", "speed up a heat stencil", "gflops=12.5",
		"undefined reference", "then: ", "not resolved on this path"} {
		require.Contains(t, string(md), want)
	}
	require.NotContains(t, string(md), "sibling result")
	var back memory.Exported
	data, err := os.ReadFile(filepath.Join(dir, memory.ExportJSON))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &back))
	require.Equal(t, e.Path, back.Path)
	snap, err := os.ReadFile(filepath.Join(dir, memory.ResourceSnapshot))
	require.NoError(t, err)
	require.JSONEq(t, `{"items":[{"name":"gcc","status":"available"}]}`, string(snap))
	// The path in the delta format: each branch's state, lossless.
	delta, err := os.ReadFile(filepath.Join(dir, memory.ExportDelta))
	require.NoError(t, err)
	tree, err := memory.DecodeDelta(string(delta))
	require.NoError(t, err, string(delta))
	require.Len(t, tree.Branches, 2)
	good := tree.Branches[1]
	require.Equal(t, "good", good.ID)
	require.Equal(t, "root", good.Parent)
	require.Len(t, good.State.Recall, 5, "the root's event and the branch's four")
	require.Equal(t, memory.StateEvent{Kind: "run_failed", Phase: "run", Node: "good", Payload: "segfault at n=4096"}, good.State.Recall[4])
	require.Len(t, good.State.Core, 3)
	require.NotContains(t, string(delta), "sibling result")
	require.Contains(t, string(delta), "k 1 0\n", "the child keeps the root's event and says so, not repeats it")

	_, err = m.Export(ctx, memory.ExportParams{Root: "good", Best: "bad", Dir: dir})
	require.ErrorIs(t, err, memory.ErrInvalid)
}

func modelResources(t *testing.T, newMemory NewMemory) {
	ctx := context.Background()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "data", "grids"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "data", "input.txt"), []byte("grid 1024x1024\nsteps 200\n"), 0o644))
	yml := filepath.Join(dir, "resources.yaml")
	require.NoError(t, os.WriteFile(yml, []byte(`resources:
  - name: input
    class: local_data
    path: data/input.txt
    summary: the stencil's input grid
  - name: grids
    class: dataset
    path: data
  - name: himeno
    class: code
    url: https://example.org/himeno.tar.gz
`), 0o644))
	idx, err := memory.LoadResources(yml, dir)
	require.NoError(t, err)
	require.Len(t, idx.Items, 3)
	require.Equal(t, memory.ResourceAvailable, idx.Items[0].FetchStatus)
	require.Equal(t, "grid 1024x1024\nsteps 200\n", idx.Items[0].ContentExcerpt)
	require.Contains(t, idx.Items[1].TreeSummary, "2 entries: grids/, input.txt")
	require.Equal(t, memory.ResourcePending, idx.Items[2].FetchStatus)
	require.Contains(t, idx.Digest, "sha256:")

	// The same list as JSON has the same digest.
	js := filepath.Join(dir, "resources.json")
	require.NoError(t, os.WriteFile(js, []byte(`[{"name":"input","class":"local_data","path":"data/input.txt","summary":"the stencil's input grid"},
	  {"name":"grids","class":"dataset","path":"data"},{"name":"himeno","class":"code","url":"https://example.org/himeno.tar.gz"}]`), 0o644))
	idx2, err := memory.LoadResources(js, dir)
	require.NoError(t, err)
	require.Equal(t, idx.Digest, idx2.Digest)
	require.NotEqual(t, idx.ResourceFileSHA, idx2.ResourceFileSHA)

	m := newMemory(t, memory.Config{}, memory.Options{})
	require.NoError(t, m.IngestResources(ctx, "root", idx))
	hits, err := m.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: "root", Query: "input grid", Tags: []string{"resource:local_data:input"}})
	require.NoError(t, err)
	require.Len(t, hits, 1)
	require.Contains(t, hits[0].Tags, "resource_path:data/input.txt")
	r, err := m.RenderForPrompt(ctx, "root", "stencil", 24000)
	require.NoError(t, err)
	require.Contains(t, r.Text, `"fetch_status":"pending"`)

	_, err = m.Fork(ctx, "child", "root")
	require.NoError(t, err)
	require.NoError(t, m.SetResourceStatus(ctx, "child", "himeno", memory.ResourceAvailable))
	e, _, err := m.CoreGet(ctx, "child", "RESOURCE_INDEX")
	require.NoError(t, err)
	var got memory.ResourceIndex
	require.NoError(t, json.Unmarshal([]byte(e.Value), &got))
	require.Equal(t, memory.ResourceAvailable, got.Items[2].FetchStatus)
	e, _, err = m.CoreGet(ctx, "root", "RESOURCE_INDEX")
	require.NoError(t, err)
	require.Contains(t, e.Value, `"fetch_status":"pending"`, "the child's fetch is its own")
	require.ErrorIs(t, m.SetResourceStatus(ctx, "child", "nope", memory.ResourceFailed), memory.ErrInvalid)
	require.ErrorIs(t, m.SetResourceStatus(ctx, "child", "himeno", "done"), memory.ErrInvalid)

	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("- name: x\n  class: c\n  colour: red\n  path: p\n"), 0o644))
	_, err = memory.LoadResources(bad, dir)
	require.ErrorContains(t, err, "colour")
	require.NoError(t, os.WriteFile(bad, []byte("- name: x\n  class: c\n"), 0o644))
	_, err = memory.LoadResources(bad, dir)
	require.ErrorIs(t, err, memory.ErrInvalid)
}

// modelRenderSectionBudgets: section_budgets cap the idea and Phase 0
// summaries and the archival section.
func modelRenderSectionBudgets(t *testing.T, newMemory NewMemory) {
	ctx := context.Background()
	cfg := memory.Config{SectionBudgets: map[string]int{"idea_summary": 100, "phase0_summary": 80, "archival_snippet": 150}}
	m := newMemory(t, cfg, memory.Options{})
	for k, v := range map[string]string{"IDEA_SUMMARY": strings.Repeat("idea ", 100), "PHASE0_SUMMARY": strings.Repeat("plan ", 100)} {
		_, err := m.CoreSet(ctx, memory.CoreSetParams{Branch: "root", Key: k, Value: v})
		require.NoError(t, err)
	}
	for i := range 10 {
		_, _, err := m.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: "root", Text: fmt.Sprintf("stencil note %d: %s", i, strings.Repeat("detail ", 10))})
		require.NoError(t, err)
	}
	r, err := m.RenderForPrompt(ctx, "root", "stencil", 24000)
	require.NoError(t, err)
	require.Contains(t, r.Text, "[... idea_summary cut to its budget of 100 chars ...]")
	require.Contains(t, r.Text, "[... phase0_summary cut to its budget of 80 chars ...]")
	require.NotContains(t, r.Text, strings.Repeat("idea ", 30))
	for _, s := range r.Sections {
		if s.Name == memory.SectionArchival {
			require.True(t, s.Truncated, "archival_snippet caps the archival section")
			require.LessOrEqual(t, s.Chars, 150+80)
		}
	}
}

// modelRenderLowersDetailToFit: when the archival hits do not fit their
// room, the weakest go to L1 then L0 (short hash and first words) before
// anything is cut; the best hit keeps its whole text.
func modelRenderLowersDetailToFit(t *testing.T, newMemory NewMemory) {
	ctx := context.Background()
	cfg := memory.Defaults()
	cfg.SectionBudgets["archival_snippet"] = 900
	m := newMemory(t, cfg, memory.Options{})
	best := "stencil stencil stencil: tiling by 32 with -O3 gave 31 GFLOP/s on the 4096 grid, the best so far"
	_, _, err := m.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: "root", Text: best, Tags: []string{"result"}})
	require.NoError(t, err)
	for i := range 8 {
		text := fmt.Sprintf("stencil note %d: %s", i, strings.Repeat("a long observation about the halo exchange and the cache ", 3))
		_, _, err := m.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: "root", Text: text})
		require.NoError(t, err)
	}
	r, err := m.RenderForPrompt(ctx, "root", "stencil", 0)
	require.NoError(t, err)
	var arch memory.SectionInfo
	for _, s := range r.Sections {
		if s.Name == memory.SectionArchival {
			arch = s
		}
	}
	require.Positive(t, arch.Degraded, "hits shown with less detail")
	require.False(t, arch.Truncated, "lower detail made it fit: nothing cut")
	require.False(t, arch.Compressed)
	require.Contains(t, r.Text, "- "+best+" [result]", "the best hit whole")
	require.Regexp(t, `- #[0-9a-f]{8} stencil note \d: a long observation`, r.Text, "weaker hits by their hash and first words (L1)")
}
