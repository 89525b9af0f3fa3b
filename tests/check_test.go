package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/fakellm"
)

// TestCheckAndSeedMemoryFlags: `scheduler check` prints the settings a run
// would use, the seed's memory flags over HPCQ_MEMORY_* over run.yaml; a
// run started with --memory_db keeps its memory in that file, and query
// and export find it there.
func TestCheckAndSeedMemoryFlags(t *testing.T) {
	t.Parallel()
	idea := writeIdea(t, 1, 1)
	f, err := os.OpenFile(filepath.Join(idea, "run.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("memory: {retrieval_k: 4}\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	srv := draftsLLM(t, func(n int) string { return runScript("echo 'METRIC score=3'\n") })
	env := baseEnv(t, "OPENAI_BASE_URL="+srv.BaseURL(), "OPENAI_API_KEY=test-key")

	out, code := run(t, env, "scheduler", "check", idea)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "retrieval_k: 4", "run.yaml's")
	require.Contains(t, out, "model:   test-model at "+srv.BaseURL())
	require.Contains(t, out, "paper:   written by `scheduler writeup` (writeup.enabled: false); no refs.bib entry (@type{key, ...}) beside the idea, no resource of class paper: it cites nothing")
	require.Contains(t, out, "metric:  what each node's program reports of itself: nothing checks it")
	require.Contains(t, out, "bound:   none: score is not checked against the host's peak (metric.bound)\n", "a score has no bound")
	require.NotContains(t, out, "test-key")
	// A timed metric: the median of repeated runs, each alone, and the
	// host's peak as its bound.
	scoreYAML := mustRead(t, filepath.Join(idea, "run.yaml"))
	timed := strings.Replace(scoreYAML, "metric: {name: score, direction: maximize}",
		"metric: {name: gflops, direction: maximize, unit: GFLOP/s}\nevaluation: {exclusive: true}", 1)
	require.NoError(t, os.WriteFile(filepath.Join(idea, "run.yaml"), []byte(timed), 0o644))
	out, code = run(t, env, "scheduler", "check", idea)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "nothing checks it (evaluation.harness: docs/evaluation.md); the median of 5 runs of it after a warm-up (evaluation.repeats); "+
		"each node's task alone on its worker (evaluation.exclusive)\n")
	require.Regexp(t, `bound:   flops: beyond [0-9.e+]+ GFLOP/s a node is impossible on this host \(peak: \d+ CPUs x `, out)
	require.NoError(t, os.WriteFile(filepath.Join(idea, "run.yaml"), []byte(scoreYAML), 0o644))
	// An idea with an evaluator: what will measure its nodes; a harness
	// holding a link is refused before anything starts (exit 2).
	evalIdea := writeIdea(t, 1, 1)
	require.NoError(t, os.MkdirAll(filepath.Join(evalIdea, "eval"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(evalIdea, "eval", "eval.sh"), []byte("#!/bin/sh\n"), 0o755))
	f, err = os.OpenFile(filepath.Join(evalIdea, "run.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("evaluation: {harness: {commands: [./eval.sh], inputs: [N=1000], quick: [N=8], repeats: 5}}\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	out, code = run(t, env, "scheduler", "check", evalIdea)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "metric:  measured by the harness "+filepath.Join(evalIdea, "eval")+" (1 file, 10 bytes): ./eval.sh on N=1000, 5 repeats each; "+
		"first, correctness only, on N=8; the programs' own numbers kept as self-reported; no held-out gate")
	gated := strings.Replace(mustRead(t, filepath.Join(evalIdea, "run.yaml")), "repeats: 5}", "repeats: 5, held_out: [N=1001, N=1531]}", 1)
	require.NoError(t, os.WriteFile(filepath.Join(evalIdea, "run.yaml"), []byte(gated), 0o644))
	out, code = run(t, env, "scheduler", "check", evalIdea)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "; when the search ends, its 3 best nodes and the baseline face 2 held-out input(s) (in no node's task or prompt): the run's best is the best there, overfit past 20%\n")
	overlap := strings.Replace(gated, "held_out: [N=1001", "held_out: [N=1000", 1)
	require.NoError(t, os.WriteFile(filepath.Join(evalIdea, "run.yaml"), []byte(overlap), 0o644))
	out, code = run(t, env, "scheduler", "check", evalIdea)
	require.Equal(t, 2, code, out)
	require.Contains(t, out, `"N=1000" is also an input of the search`)
	require.NoError(t, os.WriteFile(filepath.Join(evalIdea, "run.yaml"), []byte(gated), 0o644))
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(evalIdea, "eval", "passwd")))
	out, code = run(t, env, "scheduler", "check", evalIdea)
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "passwd is not a regular file")
	envK := append(append([]string{}, env...), "HPCQ_MEMORY_RETRIEVAL_K=5")
	out, code = run(t, envK, "scheduler", "check", idea)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "retrieval_k: 5", "the environment over run.yaml")
	out, code = run(t, envK, "scheduler", "check", "--memory_retrieval_k", "7", "--memory_core_max_chars", "9000", idea)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "retrieval_k: 7", "the flag over the environment")
	require.Contains(t, out, "core_max_chars: 9000")
	out, code = run(t, env, "scheduler", "check", "--memory_recall_max_events", "-3", idea)
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "must be positive")
	bad := writeIdea(t, 1, 1)
	require.NoError(t, os.WriteFile(filepath.Join(bad, "run.yaml"), []byte("metric: {name: score}\nmemory: {retreival_k: 3}\n"), 0o644))
	out, code = run(t, env, "scheduler", "check", bad)
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "retreival_k")

	tmp := t.TempDir()
	runDir, db := filepath.Join(tmp, "run-db"), filepath.Join(tmp, "elsewhere", "memory.sqlite")
	out, code = run(t, env, "scheduler", "run", "--local", "--run-dir", runDir, "--memory_db", db, "--memory_recall_max_events", "12", idea)
	require.Equal(t, 0, code, out)
	require.FileExists(t, db)
	require.NoFileExists(t, filepath.Join(runDir, "memory", "memory.sqlite"))
	var info struct {
		Memory map[string]string `json:"memory"`
	}
	data, err := os.ReadFile(filepath.Join(runDir, "run.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &info))
	require.Equal(t, db, info.Memory["file"])
	spec, err := os.ReadFile(filepath.Join(runDir, "spec.json"))
	require.NoError(t, err)
	require.Contains(t, string(spec), `"recall_max_events": 12`)
	q, code := run(t, env, "scheduler", "query", "--run-dir", runDir, "--format", "csv", "SELECT count(*) > 0 AS some FROM recall_events")
	require.Equal(t, 0, code, q)
	require.Equal(t, "some\n1\n", q, "query attaches the memory file where it is")
	out, code = run(t, env, "scheduler", "export", "--run-dir", runDir)
	require.Equal(t, 0, code, out)
	require.FileExists(t, filepath.Join(runDir, "memory", "final_memory_for_paper.md"))

	// Without memory the prompts ask for no memory block: replies without one.
	plain := fakellm.New(t, func(r fakellm.Request) fakellm.Reply {
		switch r.Kind {
		case "phase0":
			return fakellm.Reply{Content: fakellm.Plan("a script")}
		case "draft":
			return fakellm.Reply{Content: runScript("echo 'METRIC score=3'\n")}
		}
		return fakellm.Reply{Status: 400}
	})
	offDir := filepath.Join(tmp, "run-off")
	out, code = run(t, baseEnv(t, "OPENAI_BASE_URL="+plain.BaseURL(), "OPENAI_API_KEY=test-key"), "scheduler", "run", "--local", "--run-dir", offDir, "--enable_memgpt=false", idea)
	require.Equal(t, 0, code, out)
	data, err = os.ReadFile(filepath.Join(offDir, "run.json"))
	require.NoError(t, err)
	require.True(t, strings.Contains(string(data), `"enabled": "false"`) || strings.Contains(string(data), `"enabled":"false"`), string(data))
}
