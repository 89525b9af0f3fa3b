package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/fakellm"
)

// seedIdea writes an idea directory: a long idea (over the 4,800 chars of
// idea_section_limit) and run.yaml with the given memory block.
func seedIdea(t *testing.T, memoryBlock string) string {
	t.Helper()
	dir := t.TempDir()
	idea := "# Print a score\n\nPrint a score as high as possible.\n\n" + strings.Repeat("Some background on scores. ", 300)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "idea.md"), []byte(idea), 0o644))
	runYAML := `metric: {name: score, direction: maximize}
stages:
  initial_implementation: {max_iterations: 1}
  baseline_tuning: {max_iterations: 0}
  creative_research: {max_iterations: 0}
  ablation_studies: {max_iterations: 0}
search: {num_drafts: 1, slots: 1}
llm: {model: test-model}
memory:
` + memoryBlock
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run.yaml"), []byte(runYAML), 0o644))
	return dir
}

// TestSeedMemoryToggles: the seed's memory keys act in `scheduler run`:
// the idea and each Phase 0 kept in archival memory, IDEA_SUMMARY and
// PHASE0_SUMMARY in core, long sections compressed by compression_model,
// the export under its configured names, the call log in memory_log_dir
// with content; and, turned off, none of it.
func TestSeedMemoryToggles(t *testing.T) {
	t.Parallel()
	replies := func(r fakellm.Request) fakellm.Reply {
		switch r.Kind {
		case "phase0":
			return fakellm.Reply{Content: fakellm.WithMemory("{}", fakellm.Plan("a script"))}
		case "draft":
			return fakellm.Reply{Content: fakellm.WithMemory("{}", runScript("echo 'METRIC score=3'\n"))}
		case "compress":
			return fakellm.Reply{Content: "- print a score, as high as possible"}
		}
		return fakellm.Reply{Status: 400}
	}
	tmp := t.TempDir()

	srv := fakellm.New(t, replies)
	logDir := filepath.Join(tmp, "memlogs")
	on := seedIdea(t, `  compression_model: small-model
  final_memory_filename_md: paper.md
  final_memory_filename_json: paper.json
  memory_log_dir: `+logDir+`
  memory_log_max_chars: 100
`)
	runDir := filepath.Join(tmp, "run-on")
	env := baseEnv(t, "OPENAI_BASE_URL="+srv.BaseURL(), "OPENAI_API_KEY=test-key")
	out, code := run(t, env, "scheduler", "run", "--local", "--run-dir", runDir, on)
	require.Equal(t, 0, code, out)
	q := func(dir, sql string) string {
		t.Helper()
		out, code := run(t, env, "scheduler", "query", "--run-dir", dir, "--format", "csv", sql)
		require.Equal(t, 0, code, out)
		return out
	}
	require.Equal(t, "n\n1\n", q(runDir, "SELECT count(*) AS n FROM archival WHERE tags LIKE '%IDEA_MD%' AND text LIKE '%Some background on scores.%'"))
	require.Equal(t, "n\n1\n", q(runDir, "SELECT count(*) AS n FROM archival WHERE branch = 'n0001' AND tags LIKE '%PHASE0_INTERNAL%'"))
	require.Equal(t, "n\n1\n", q(runDir, `SELECT count(*) AS n FROM archival WHERE branch = 'n0001' AND tags LIKE '%"code:n0001"%' AND text LIKE '%METRIC score=3%'`),
		"a snapshot of the node's code")
	require.Equal(t, "n\n1\n", q(runDir, `SELECT count(*) AS n FROM archival WHERE branch = 'n0001' AND tags LIKE '%"results:n0001"%' AND text LIKE '%score%'`),
		"and of its results")
	require.FileExists(t, filepath.Join(runDir, "nodes", "n0001", "phase0_history_full.json"))
	compress := 0
	for _, r := range srv.Requests() {
		if r.Kind == "compress" {
			compress++
			require.Equal(t, "small-model", r.Model, "compression_model answers compressions")
		}
	}
	require.Positive(t, compress, "the idea over its budgets is compressed")
	for _, r := range srv.Requests() {
		if r.Kind == "draft" {
			require.Equal(t, "- print a score, as high as possible", ideaSection(r.Last()), "the idea section compressed to its limit")
			require.Contains(t, r.Last(), "PHASE0_SUMMARY", "the plan's summary is in the node's core")
		}
	}
	require.FileExists(t, filepath.Join(runDir, "memory", "paper.md"))
	require.FileExists(t, filepath.Join(runDir, "memory", "paper.json"))
	require.NoFileExists(t, filepath.Join(runDir, "memory", "final_memory_for_paper.md"))
	require.NoFileExists(t, filepath.Join(runDir, "memory", "memory_calls.jsonl"))
	calls, err := os.ReadFile(filepath.Join(logDir, "run-on-memory_calls.jsonl"))
	require.NoError(t, err)
	require.Contains(t, string(calls), `"op":"core_set","in_bytes"`)
	require.Contains(t, string(calls), `"input":"IDEA_SUMMARY: `)
	require.Contains(t, string(calls), `…[cut]"`, "content cut to memory_log_max_chars")

	plain := fakellm.New(t, replies)
	off := seedIdea(t, `  persist_idea_md: false
  always_inject_idea_summary: false
  persist_phase0_internal: false
  always_inject_phase0_summary: false
  final_memory_enabled: false
  use_llm_compression: false
  memory_log_enabled: false
`)
	offDir := filepath.Join(tmp, "run-off")
	out, code = run(t, baseEnv(t, "OPENAI_BASE_URL="+plain.BaseURL(), "OPENAI_API_KEY=test-key"), "scheduler", "run", "--local", "--run-dir", offDir, off)
	require.Equal(t, 0, code, out)
	require.Equal(t, "n\n0\n", q(offDir, "SELECT count(*) AS n FROM archival WHERE tags LIKE '%IDEA_MD%' OR tags LIKE '%PHASE0_INTERNAL%'"))
	require.Zero(t, plain.Count("compress"), "compression off: sections are cut")
	for _, r := range plain.Requests() {
		if r.Kind == "draft" {
			idea := ideaSection(r.Last())
			require.LessOrEqual(t, len(idea), 4800)
			require.Contains(t, idea, "[... truncated:", "the idea section cut to idea_section_limit")
			require.NotContains(t, r.Last(), "IDEA_SUMMARY")
			require.NotContains(t, r.Last(), "PHASE0_SUMMARY")
		}
	}
	require.NoFileExists(t, filepath.Join(offDir, "memory", "final_memory_for_paper.md"))
	require.NoFileExists(t, filepath.Join(offDir, "memory", "memory_calls.jsonl"))
}

// ideaSection is the Research idea section of a prompt.
func ideaSection(prompt string) string {
	_, rest, _ := strings.Cut(prompt, "# Research idea\n\n")
	sec, _, _ := strings.Cut(rest, "\n\n# ")
	return strings.TrimSpace(sec)
}

// TestMemorySweep: seed 004's sweep in `scheduler run`: a debug node that
// meets its parent's compile error again has the two episodes (their
// durations aside) consolidated into one semantic fact in its branch, whose
// count is 2; the parent's branch, with one episode, has none.
func TestMemorySweep(t *testing.T) {
	t.Parallel()
	fail := fakellm.Artifacts([]fakellm.File{{Path: "m.c", Content: "int main(void) { return 0 }\n"}}, []string{"gcc -o m m.c"}, []string{"./m"})
	srv := fakellm.New(t, func(r fakellm.Request) fakellm.Reply {
		switch r.Kind {
		case "phase0":
			return fakellm.Reply{Content: fakellm.WithMemory("{}", fakellm.Plan("a C program"))}
		case "draft", "debug":
			return fakellm.Reply{Content: fakellm.WithMemory("{}", fail)}
		case "summary":
			return fakellm.Reply{Content: fakellm.WithMemory("{}", `{"summary": "a C program that does not build"}`)}
		}
		return fakellm.Reply{Status: 400}
	})
	idea := ideaDir(t, "Build a C program", `metric: {name: score, direction: maximize}
stages:
  initial_implementation: {max_iterations: 2}
  baseline_tuning: {max_iterations: 0}
  creative_research: {max_iterations: 0}
  ablation_studies: {max_iterations: 0}
search: {num_drafts: 1, debug_prob: 1.0, max_debug_depth: 2, slots: 1}
llm: {model: test-model}
memory: {sweep_interval_s: 3600, consolidate_min_episodes: 2, decay_half_life_hours: 48}
`)
	runDir := filepath.Join(t.TempDir(), "run-sweep")
	env := baseEnv(t, "OPENAI_BASE_URL="+srv.BaseURL(), "OPENAI_API_KEY=test-key")
	out, code := run(t, env, "scheduler", "run", "--local", "--run-dir", runDir, idea)
	require.Equal(t, 1, code, "no node produced the metric: "+out)
	q, code := run(t, env, "scheduler", "query", "--run-dir", runDir, "--format", "csv",
		`SELECT branch, substr(text, 1, 50) AS fact FROM archival WHERE tags LIKE '%"SEMANTIC"%' ORDER BY seq`)
	require.Equal(t, 0, code, q)
	// A fact is one row however often it was seen (the store counts the
	// repeats): the same files written, the same diagnostics, the same error.
	require.Equal(t, "branch,fact\nn0002,[SEMANTIC] phase_complete (coding): wrote 1 files:\n"+
		"n0002,[SEMANTIC] compile_diagnostics (compile): m.c:1:26\nn0002,[SEMANTIC] error_encountered (compile): exit 1: co\n", q,
		"in the debug node's branch only: the draft saw each once")
	data, err := os.ReadFile(filepath.Join(runDir, "run.json"))
	require.NoError(t, err)
	require.Contains(t, string(data), `"half_life": "48h0m0s"`)
}
