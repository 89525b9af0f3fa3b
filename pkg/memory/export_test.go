package memory_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/memory"
)

func TestExport(t *testing.T) {
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

	_, err = m.Export(ctx, memory.ExportParams{Root: "good", Best: "bad", Dir: dir})
	require.ErrorIs(t, err, memory.ErrInvalid)
}
