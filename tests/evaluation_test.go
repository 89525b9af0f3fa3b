package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/fakellm"
	"github.com/hpcq/hpcq/pkg/rundir"
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

// TestHeldOutGate: an idea whose harness checks each node's sum.sh against
// the sum 1..N and measures a score of its own. The node that prints 5000
// without doing the work is found incorrect in the search; the node right
// only for even N wins the search and is found incorrect at the held-out
// gate (odd N); the honest node is the run's best. `scheduler run` says so
// in its evaluation line, gate.json, report.md and the nodes rows; the
// held-out inputs reach no prompt and no node's task.
func TestHeldOutGate(t *testing.T) {
	t.Parallel()
	scripts := map[int]struct{ sum, claim string }{
		1: {"echo 42\n", "5000"},                          // the liar
		2: {"echo $(($1/2*($1+1)))\n", "990"},             // right for even N only
		3: {"echo $(( $1*($1+1)/2))\n", "977"},            // honest
		4: {"n=$1\necho $(( n * (n + 1) / 2 ))\n", "900"}, // honest, longer
	}
	handle := func(r fakellm.Request) fakellm.Reply {
		switch r.Kind {
		case "phase0":
			return fakellm.Reply{Content: fakellm.WithMemory("{}", fakellm.Plan("a script"))}
		case "draft":
			s := scripts[r.KindN]
			return fakellm.Reply{Content: fakellm.WithMemory("{}", fakellm.Artifacts([]fakellm.File{{Path: "sum.sh", Content: s.sum},
				{Path: "run.sh", Content: "echo 'METRIC score=" + s.claim + "'\n"}}, nil, []string{"bash run.sh"}))}
		}
		return fakellm.Reply{Status: 400}
	}
	srv := fakellm.New(t, handle)
	idea := ideaDir(t, "Sum 1 to N", `metric: {name: score, direction: maximize}
stages: {initial_implementation: {max_iterations: 4}, baseline_tuning: {max_iterations: 0}, creative_research: {max_iterations: 0}, ablation_studies: {max_iterations: 0}}
search: {num_drafts: 4, slots: 1, debug_prob: 0}
llm: {model: test-model}
evaluation:
  execution_review: false
  parse_metrics: false
  node_summary: false
  harness:
    commands: [sh eval.sh]
    quick: [N=4]
    inputs: [N=50]
    held_out: [N=51, N=99]
    repeats: 1
`)
	require.NoError(t, os.Mkdir(filepath.Join(idea, "eval"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(idea, "eval", "eval.sh"), []byte(`: > "$HPCQ_EVAL_REPORT"
size=$(wc -c < "$HPCQ_NODE/sum.sh")
printf '%s\n' "$HPCQ_INPUTS" | while IFS== read -r name n; do
	want=$(( n * (n + 1) / 2 ))
	got=$(sh "$HPCQ_NODE/sum.sh" "$n")
	if [ "$got" = "$want" ]; then
		printf '{"input":"N=%s","repeat":1,"correct":true,"metric":%d}\n' "$n" $((1000 - size)) >> "$HPCQ_EVAL_REPORT"
	else
		printf '{"input":"N=%s","repeat":1,"correct":false,"note":"got %s, want %s"}\n' "$n" "$got" "$want" >> "$HPCQ_EVAL_REPORT"
	fi
done
`), 0o644))
	runDir := filepath.Join(t.TempDir(), "run-gate")
	env := baseEnv(t, "OPENAI_BASE_URL="+srv.BaseURL(), "OPENAI_API_KEY=test-key")
	out, code := run(t, env, "scheduler", "run", "--local", "--run-dir", runDir, idea)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "best n0002: score = 978\n", "the even-only node wins the search")
	require.Contains(t, out, "held-out n0003 (top): held, score = 977 (search: 977)\n")
	require.Contains(t, out, "\nevaluation nodes=4 correct=2 incorrect=2 self_report_rejected=2 held_out_best=n0003 held_out_metric=977 overfit=0\n")
	require.Contains(t, out, "held-out n0002 (top, baseline): incorrect on N=51 (repeat 1): got 1300, want 1326\n")
	require.Contains(t, out, "the run's best is n0003, the best on the held-out inputs (the search's best was n0002)")

	var g rundir.Gate
	ok, err := rundir.ReadJSON(filepath.Join(runDir, rundir.GateFile), &g)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "n0003", g.Best)
	require.Equal(t, 2, g.Inputs)
	require.NotContains(t, mustRead(t, filepath.Join(runDir, rundir.GateFile)), "N=99", "gate.json counts the held-out inputs, never lists them")

	q, code := run(t, env, "scheduler", "query", "--run-dir", runDir, "--format", "csv",
		"SELECT node, status, metric_value, metric_from, self_reported, held_out, held_out_metric FROM nodes ORDER BY node")
	require.Equal(t, 0, code, q)
	require.Equal(t, "node,status,metric_value,metric_from,self_reported,held_out,held_out_metric\n"+
		"n0001,failed,NULL,,5000,,NULL\n"+
		"n0002,ok,978,evaluator,990,incorrect,NULL\n"+
		"n0003,ok,977,evaluator,977,held,977\n"+
		"n0004,ok,967,evaluator,900,held,967\n", q)
	report := mustRead(t, filepath.Join(runDir, "report.md"))
	require.Contains(t, report, "## The held-out gate")
	require.Contains(t, report, "**Best node on the held-out inputs: n0003**, score = 977")
	require.Contains(t, report, "**Best node of the search: n0002**")

	for _, r := range srv.Requests() {
		for _, m := range r.Messages {
			require.NotContains(t, m.Content, "N=51", "a held-out input in a %s prompt", r.Kind)
			require.NotContains(t, m.Content, "N=99", "a held-out input in a %s prompt", r.Kind)
		}
	}
	for _, n := range []string{"n0001", "n0002", "n0003", "n0004"} {
		require.NotContains(t, mustRead(t, filepath.Join(runDir, "nodes", n, "task.json")), "N=51", "the search's tasks carry no held-out input")
	}

	// A resumed run (here: one whose search had ended) passes the gate
	// again, its tasks answered from the results stream, not run again.
	before := mustRead(t, filepath.Join(runDir, rundir.GateDir, "n0003.json"))
	out, code = run(t, env, "scheduler", "run", "--local", "--resume", runDir)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "\nevaluation nodes=4 correct=2 incorrect=2 self_report_rejected=2 held_out_best=n0003 held_out_metric=977 overfit=0\n")
	require.Equal(t, before, mustRead(t, filepath.Join(runDir, rundir.GateDir, "n0003.json")), "the same answer, not a new run")
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(data)
}
