package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/fakellm"
)

// TestEvaluationPrompts: seed 003's evaluation prompts in `scheduler run`:
// the metrics parser reads a metric no scanner found, the execution review
// fails a run whose output is wrong despite its metric, every node that
// ran gets a summary (result.json, memory); each is an llm_calls purpose;
// turned off in run.yaml, none is asked.
func TestEvaluationPrompts(t *testing.T) {
	t.Parallel()
	handle := func(r fakellm.Request) fakellm.Reply {
		switch r.Kind {
		case "phase0":
			return fakellm.Reply{Content: fakellm.WithMemory("{}", fakellm.Plan("a script"))}
		case "draft":
			script := "echo 'the score is 7 (no METRIC line)'\n"
			if r.KindN == 2 {
				script = "echo 'checksum=nan'\necho 'METRIC score=9'\n"
			}
			return fakellm.Reply{Content: fakellm.WithMemory("{}", runScript(script))}
		case "parse_metrics":
			return fakellm.Reply{Content: fakellm.WithMemory("{}", `{"metrics": [{"name": "score", "value": 7}]}`)}
		case "execution_review":
			return fakellm.Reply{Content: fakellm.WithMemory("{}", `{"is_bug": true, "summary": "the checksum is NaN: the result is wrong"}`)}
		case "summary":
			return fakellm.Reply{Content: fakellm.WithMemory("{}", `{"summary": "a shell script that prints a score"}`)}
		}
		return fakellm.Reply{Status: 400}
	}
	srv := fakellm.New(t, handle)
	idea := writeIdea(t, 2, 1)
	runDir := filepath.Join(t.TempDir(), "run-eval")
	env := baseEnv(t, "OPENAI_BASE_URL="+srv.BaseURL(), "OPENAI_API_KEY=test-key")
	out, code := run(t, env, "scheduler", "run", "--local", "--run-dir", runDir, idea)
	require.Equal(t, 0, code, out)
	read := func(node string) map[string]any {
		data, err := os.ReadFile(filepath.Join(runDir, "nodes", node, "result.json"))
		require.NoError(t, err)
		var o map[string]any
		require.NoError(t, json.Unmarshal(data, &o))
		return o
	}
	n1, n2 := read("n0001"), read("n0002")
	require.Equal(t, false, n1["buggy"], n1["reason"])
	require.Equal(t, 7.0, n1["metric"], "the metrics parser read it")
	require.Equal(t, "parse_metrics", n1["metric_from"])
	require.Equal(t, true, n2["buggy"])
	require.Equal(t, "execution review: the checksum is NaN: the result is wrong", n2["reason"])
	require.Equal(t, "a shell script that prints a score", n1["summary"])
	q, code := run(t, env, "scheduler", "query", "--run-dir", runDir, "--format", "csv",
		"SELECT purpose, count(*) AS n FROM llm_calls WHERE purpose IN ('parse_metrics', 'execution_review', 'summary') GROUP BY purpose ORDER BY purpose")
	require.Equal(t, 0, code, q)
	require.Equal(t, "purpose,n\nexecution_review,1\nparse_metrics,1\nsummary,2\n", q)
	q, code = run(t, env, "scheduler", "query", "--run-dir", runDir, "--format", "csv",
		`SELECT count(*) AS n FROM archival WHERE tags LIKE '%"summary:n0001"%'`)
	require.Equal(t, 0, code, q)
	require.Equal(t, "n\n1\n", q, "the summary is in the node's memory")
	q, code = run(t, env, "scheduler", "query", "--run-dir", runDir, "--format", "csv", "SELECT node, status, metric_value FROM nodes ORDER BY node")
	require.Equal(t, 0, code, q)
	require.Equal(t, "node,status,metric_value\nn0001,ok,7\nn0002,failed,NULL\n", q)

	off := writeIdea(t, 2, 1)
	f, err := os.OpenFile(filepath.Join(off, "run.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("evaluation: {execution_review: false, parse_metrics: false, node_summary: false}\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	quiet := fakellm.New(t, handle)
	offDir := filepath.Join(t.TempDir(), "run-off")
	out, code = run(t, baseEnv(t, "OPENAI_BASE_URL="+quiet.BaseURL(), "OPENAI_API_KEY=test-key"), "scheduler", "run", "--local", "--run-dir", offDir, off)
	require.Equal(t, 0, code, out)
	for _, k := range []string{"parse_metrics", "execution_review", "summary"} {
		require.Zero(t, quiet.Count(k), k)
	}
	data, err := os.ReadFile(filepath.Join(offDir, "nodes", "n0001", "result.json"))
	require.NoError(t, err)
	require.Contains(t, string(data), `the run reported no \"score\" metric`)
}

// TestPromptSectionsFromRunYAML: run.yaml's system message and domain
// reach every prompt; a debug prompt has the Time feedback of its parent.
func TestPromptSectionsFromRunYAML(t *testing.T) {
	t.Parallel()
	handle := func(r fakellm.Request) fakellm.Reply {
		switch r.Kind {
		case "phase0":
			return fakellm.Reply{Content: fakellm.WithMemory("{}", fakellm.Plan("a script"))}
		case "draft":
			return fakellm.Reply{Content: fakellm.WithMemory("{}", runScript("echo 'no metric here'\n"))}
		case "debug":
			return fakellm.Reply{Content: fakellm.WithMemory("{}", runScript("echo 'METRIC score=2'\n"))}
		}
		return fakellm.Reply{Status: 400}
	}
	srv := fakellm.New(t, handle)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "idea.md"), []byte("# Print a score\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run.yaml"), []byte(`metric: {name: score}
stages: {initial_implementation: {max_iterations: 2}, baseline_tuning: {max_iterations: 0}, creative_research: {max_iterations: 0}, ablation_studies: {max_iterations: 0}}
search: {num_drafts: 1, slots: 1, debug_prob: 1}
llm: {model: test-model}
limits: {run_timeout_s: 60}
prompt: {system: "You are the test system of this run.", domain: "Stencils are memory bound on this machine."}
evaluation: {execution_review: false, parse_metrics: false, node_summary: false}
`), 0o644))
	out, code := run(t, baseEnv(t, "OPENAI_BASE_URL="+srv.BaseURL(), "OPENAI_API_KEY=test-key"), "scheduler", "run", "--local",
		"--run-dir", filepath.Join(t.TempDir(), "run-sections"), dir)
	require.Equal(t, 0, code, out)
	debugs := 0
	for _, r := range srv.Requests() {
		if r.Kind == "" {
			continue
		}
		require.Equal(t, "You are the test system of this run.", r.Messages[0].Content, r.Kind)
		require.Contains(t, r.Messages[1].Content, "# Domain\n\nStencils are memory bound on this machine.", r.Kind)
		if r.Kind == "debug" {
			debugs++
			require.Regexp(t, `# Time feedback\n\n- run: \d+\.\d s of its 60 s limit`, r.Last())
		}
	}
	require.Equal(t, 1, debugs)
}
