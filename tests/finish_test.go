package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/fakellm"
	"github.com/hpcq/hpcq/internal/search"
)

// pricedIdea is a run of drafts only, at gpt-4o-mini's price, with yaml's
// extra llm settings.
func pricedIdea(t *testing.T, drafts int, llmYAML string) string {
	return ideaDir(t, "Print a score", `metric: {name: score, direction: maximize}
stages:
  initial_implementation: {max_iterations: `+strconv.Itoa(drafts)+`}
  baseline_tuning: {max_iterations: 0}
  creative_research: {max_iterations: 0}
  ablation_studies: {max_iterations: 0}
search: {num_drafts: `+strconv.Itoa(drafts)+`, slots: 1}
llm:
  model: gpt-4o-mini
  max_tokens: 2000
  prices:
    gpt-4o-mini: {in_per_mtok: 0.15, out_per_mtok: 0.6}
`+llmYAML)
}

// TestUnansweredReplies: against an endpoint that answers with dated
// model names as OpenAI does, a draft the model refuses, one Azure's
// content filter stops and one cut at its output limit each end buggy
// with a reason of its own (no <memory_update> or JSON wording), each
// asked once more and no more; llm_calls keeps each finish and prices
// every call at the requested model's price; the report counts them.
func TestUnansweredReplies(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	drafts := 0
	srv := fakellm.NewWith(t, fakellm.Options{Snapshot: "2024-07-18"}, func(r fakellm.Request) fakellm.Reply {
		rep := fakellm.Reply{TokensIn: 2000, TokensOut: 300}
		switch r.Kind {
		case "phase0":
			rep.Content = fakellm.WithMemory("{}", fakellm.Plan("a script"))
			return rep
		case "draft":
		default:
			rep.Content = "{}"
			return rep
		}
		mu.Lock()
		drafts++
		n := drafts
		mu.Unlock()
		switch (n + 1) / 2 { // the drafts come one at a time (slots: 1), each asked twice
		case 1:
			rep.Refusal = "I can't help with that."
		case 2:
			rep.Content, rep.FinishReason, rep.Filter = `<memory_update>{}</memory_update>{"phase_arti`, "content_filter", fakellm.FilterResults("violence", "medium")
		case 3:
			rep.Content, rep.FinishReason = `<memory_update>{}</memory_update>{"phase_artifacts": {"code": "echo`, "length"
		default:
			rep.Content = fakellm.WithMemory("{}", runScript("echo 'METRIC score=1'\n"))
		}
		return rep
	})
	env := baseEnv(t, "OPENAI_BASE_URL="+srv.BaseURL(), "OPENAI_API_KEY=k", "HPCQ_LLM_CONCURRENCY=1")
	dir := filepath.Join(t.TempDir(), "run-unanswered")
	out, code := run(t, env, "scheduler", "run", "--local", "--run-dir", dir, pricedIdea(t, 4, ""))
	require.Equal(t, 0, code, out)

	var tree search.TreeJSON
	data, err := os.ReadFile(filepath.Join(dir, "tree.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &tree))
	var reasons []string
	for _, n := range tree.Nodes {
		if n.Buggy {
			reasons = append(reasons, n.Reason)
			require.NotContains(t, n.Reason, "memory_update", n.ID)
			require.NotContains(t, n.Reason, "JSON", n.ID)
		}
	}
	require.Len(t, reasons, 3, out)
	all := strings.Join(reasons, "\n")
	require.Contains(t, all, `the model refused: "I can't help with that."`)
	require.Contains(t, all, "the endpoint's content filter stopped it: the reply after 45 bytes (violence (medium))")
	require.Contains(t, all, "the reply was cut at its output limit: 300 tokens, 67 bytes written, at max_tokens 2000; raise llm.max_tokens (to 4000 or more")
	require.Equal(t, 7, drafts, "each unanswered draft asked once more, no more")

	q, code := run(t, env, "scheduler", "query", "--run-dir", dir, "--format", "csv",
		"SELECT finish_reason, count(*) AS n FROM llm_calls WHERE purpose = 'draft' GROUP BY finish_reason ORDER BY finish_reason")
	require.Equal(t, 0, code, q)
	require.Contains(t, q, "content_filter,2\nlength,2\nrefusal,2\nstop,1")
	q, code = run(t, env, "scheduler", "query", "--run-dir", dir, "--format", "csv",
		"SELECT min(model), max(model), sum(unpriced), round(sum(cost_usd), 6), count(*) FROM llm_calls")
	require.Equal(t, 0, code, q)
	f := strings.Split(strings.Split(strings.TrimSpace(q), "\n")[1], ",")
	require.Equal(t, []string{"gpt-4o-mini-2024-07-18", "gpt-4o-mini-2024-07-18", "0"}, f[:3], "answered as a dated snapshot, priced as the model")
	calls, _ := strconv.Atoi(f[4])
	cost, _ := strconv.ParseFloat(f[3], 64)
	require.InDelta(t, float64(calls)*(2000*0.15+300*0.6)/1e6, cost, 1e-6)

	report, err := os.ReadFile(filepath.Join(dir, "report.md"))
	require.NoError(t, err)
	require.Contains(t, string(report), "replies without an answer: 2 content_filter (draft), 2 length (draft), 2 refusal (draft)")
}

// TestCostBudgetOnDatedModels: a cost budget stops a run whose endpoint
// answers with dated model names (priced as the requested model); a budget
// no price can enforce refuses to start, and `scheduler check` says so.
func TestCostBudgetOnDatedModels(t *testing.T) {
	t.Parallel()
	srv := fakellm.NewWith(t, fakellm.Options{Snapshot: "2024-07-18"}, func(r fakellm.Request) fakellm.Reply {
		rep := fakellm.Reply{TokensIn: 100_000, TokensOut: 1000}
		switch r.Kind {
		case "phase0":
			rep.Content = fakellm.WithMemory("{}", fakellm.Plan("a script"))
		case "draft":
			rep.Content = fakellm.WithMemory("{}", runScript("echo 'METRIC score="+strconv.Itoa(r.KindN)+"'\n"))
		default:
			rep.Content = "{}"
		}
		return rep
	})
	env := baseEnv(t, "OPENAI_BASE_URL="+srv.BaseURL(), "OPENAI_API_KEY=k", "HPCQ_LLM_CONCURRENCY=1")
	idea := pricedIdea(t, 6, "  budget: {max_cost_usd: 0.05}\n")
	dir := filepath.Join(t.TempDir(), "run-budget")
	out, code := run(t, env, "scheduler", "run", "--local", "--run-dir", dir, idea)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "budget")
	q, code := run(t, env, "scheduler", "query", "--run-dir", dir, "--format", "csv", "SELECT count(*), round(sum(cost_usd), 6) FROM llm_calls")
	require.Equal(t, 0, code, q)
	f := strings.Split(strings.Split(strings.TrimSpace(q), "\n")[1], ",")
	require.Equal(t, "4", f[0], "$0.0156 a call: the fourth reaches $0.05, no fifth is sent\n%s", out)
	require.Equal(t, "0.0624", f[1])

	sent := len(srv.Requests())
	env = baseEnv(t, "OPENAI_BASE_URL="+srv.BaseURL(), "OPENAI_API_KEY=k", "HPCQ_LLM_MODEL=house-model")
	out, code = run(t, env, "scheduler", "run", "--local", "--run-dir", filepath.Join(t.TempDir(), "run-unpriced"), idea)
	require.NotEqual(t, 0, code, out)
	require.Contains(t, out, "no price in llm.prices resolves to house-model: the budget could not be enforced")
	require.Len(t, srv.Requests(), sent, "nothing sent for the refused run")
	out, code = run(t, env, "scheduler", "check", idea)
	require.NotEqual(t, 0, code, out)
	require.Contains(t, out, "prices:  house-model: none (its calls' cost will not be known); the budget of $0.05 cannot be enforced")
}
