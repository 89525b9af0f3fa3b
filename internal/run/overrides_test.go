package run

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMemoryOverrides(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "idea.md", "# stencil\n")
	p := write(t, dir, "run.yaml", `
metric: {name: gflops}
memory: {enabled: false, db_path: mem.sqlite, retrieval_k: 4, recall_max_events: 10}
`)
	s, err := LoadIdeaDir(filepath.Dir(p))
	require.NoError(t, err)
	require.False(t, *s.Memory.Enabled)
	require.Equal(t, filepath.Join(dir, "mem.sqlite"), s.Memory.DBPath, "relative to run.yaml, as idea_file")

	on, k, core := true, 6, 9000
	require.NoError(t, MemoryOverrides{Enabled: &on, RetrievalK: &k, CoreMaxChars: &core}.Apply(&s))
	require.True(t, *s.Memory.Enabled)
	require.Equal(t, 6, s.Memory.RetrievalK)
	require.Equal(t, 9000, s.Memory.CoreMaxChars)
	require.Equal(t, 10, s.Memory.RecallMaxEvents, "not overridden: run.yaml's")
	wd, err := os.Getwd()
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "mem.sqlite"), s.Memory.DBPath, "no override: run.yaml's")
	db := "flag.sqlite"
	require.NoError(t, MemoryOverrides{DB: &db}.Apply(&s))
	require.Equal(t, filepath.Join(wd, "flag.sqlite"), s.Memory.DBPath, "a flag's relative path is from the working directory")

	neg := -1
	err = MemoryOverrides{RecallMaxEvents: &neg}.Apply(&s)
	require.ErrorContains(t, err, "recall_max_events")
}

// TestTogglesAreIndependent: turning one toggle off in run.yaml leaves the
// others on.
func TestTogglesAreIndependent(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "idea.md", "# stencil\n")
	write(t, dir, "run.yaml", "metric: {name: gflops}\nmemory: {enabled: false, persist_idea_md: false}\n")
	s, err := LoadIdeaDir(dir)
	require.NoError(t, err)
	require.False(t, *s.Memory.Enabled)
	require.False(t, *s.Memory.PersistIdeaMD)
	for name, p := range map[string]*bool{"log_prompts": s.LogPrompts, "persist_phase0_internal": s.Memory.PersistPhase0Internal,
		"always_inject_idea_summary": s.Memory.AlwaysInjectIdeaSummary, "final_memory_enabled": s.Memory.FinalMemoryEnabled,
		"use_llm_compression": s.Memory.UseLLMCompression, "memory_log_enabled": s.Memory.LogEnabled} {
		require.True(t, *p, name)
	}
}
