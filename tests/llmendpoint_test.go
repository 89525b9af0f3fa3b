package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/fakellm"
	"github.com/hpcq/hpcq/internal/search"
)

// reasoningIdea is a two-draft idea whose run.yaml names a chat model
// with a temperature, as the example does; HPCQ_LLM_MODEL names another.
func reasoningIdea(t *testing.T) string {
	return ideaDir(t, "Print a score", `metric: {name: score, direction: maximize}
stages:
  initial_implementation: {max_iterations: 2}
  baseline_tuning: {max_iterations: 0}
  creative_research: {max_iterations: 0}
  ablation_studies: {max_iterations: 0}
search: {num_drafts: 2, slots: 1}
llm:
  model: gpt-4o-mini
  temperature: 0.7
  max_tokens: 8000
  reasoning_effort: low
  prices:
    gpt-5.2: {in_per_mtok: 1.75, cached_in_per_mtok: 0.175, out_per_mtok: 14}
`)
}

// requireNodesOK checks that the run in dir made n nodes, none buggy.
func requireNodesOK(t *testing.T, dir string, n int) {
	t.Helper()
	var tree search.TreeJSON
	data, err := os.ReadFile(filepath.Join(dir, "tree.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &tree))
	require.Len(t, tree.Nodes, n)
	for _, node := range tree.Nodes {
		require.False(t, node.Buggy, "%s: %s", node.ID, node.Reason)
	}
}

// TestReasoningModelRun: HPCQ_LLM_MODEL=gpt-5.2 wins over run.yaml's
// model; against an endpoint that refuses what OpenAI refuses of a
// reasoning model (max_tokens, a temperature), the run completes with ok
// nodes, every request streamed with max_completion_tokens, no
// temperature and the effort; llm_calls keeps the reasoning and cached
// tokens, and the cost prices the cached ones as such.
func TestReasoningModelRun(t *testing.T) {
	t.Parallel()
	srv := fakellm.NewWith(t, fakellm.Options{Key: "test-key", Models: []string{"gpt-5.2"}}, func(r fakellm.Request) fakellm.Reply {
		usage := fakellm.Reply{TokensIn: 1000, CachedTokens: 400, TokensOut: 600, ReasoningTokens: 500}
		switch r.Kind {
		case "phase0":
			usage.Content = fakellm.WithMemory("{}", fakellm.Plan("a script"))
		case "draft":
			usage.Content = fakellm.WithMemory("{}", runScript("echo 'METRIC score="+strconv.Itoa(r.KindN)+"'\n"))
		default:
			usage.Content = "{}"
		}
		return usage
	})
	env := baseEnv(t, "OPENAI_BASE_URL="+srv.BaseURL(), "OPENAI_API_KEY=test-key", "HPCQ_LLM_MODEL=gpt-5.2")
	dir := filepath.Join(t.TempDir(), "run-reasoning")
	out, code := run(t, env, "scheduler", "run", "--local", "--run-dir", dir, reasoningIdea(t))
	require.Equal(t, 0, code, out)
	requireNodesOK(t, dir, 2)
	reqs := srv.Requests()
	require.NotEmpty(t, reqs)
	for _, r := range reqs {
		require.Equal(t, "gpt-5.2", r.Model, "request %d (%s)", r.N, r.Kind)
		require.Equal(t, 8000, r.MaxCompletionTokens, "request %d", r.N)
		require.Zero(t, r.MaxTokens)
		require.Nil(t, r.Temperature, "request %d", r.N)
		require.Equal(t, "low", r.ReasoningEffort)
		require.True(t, r.Stream)
	}
	q, code := run(t, env, "scheduler", "query", "--run-dir", dir, "--format", "csv",
		"SELECT count(*), sum(reasoning_tokens), sum(cached_tokens), sum(tokens_estimated), round(sum(cost_usd), 6) FROM llm_calls WHERE error = ''")
	require.Equal(t, 0, code, q)
	f := strings.Split(strings.Split(strings.TrimSpace(q), "\n")[1], ",")
	calls, _ := strconv.Atoi(f[0])
	require.Equal(t, len(reqs), calls, q)
	require.Equal(t, strconv.Itoa(500*calls), f[1], "reasoning tokens")
	require.Equal(t, strconv.Itoa(400*calls), f[2], "cached tokens")
	require.Equal(t, "0", f[3], "the endpoint reported usage")
	cost, _ := strconv.ParseFloat(f[4], 64)
	require.InDelta(t, float64(calls)*(600*1.75+400*0.175+600*14)/1e6, cost, 1e-6, "cached tokens at their price")
	var info struct {
		LLM map[string]string `json:"llm"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "run.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &info))
	require.Equal(t, "gpt-5.2", info.LLM["model"])
	require.Contains(t, info.LLM["sends"], "gpt-5.2, a reasoning model (by its name), to an OpenAI-compatible endpoint: max_completion_tokens")
}

// TestMisconfiguredEndpointStopsTheRun: an endpoint that refuses a
// parameter every request carries (here: a reasoning model told it is not
// one, so max_tokens and a temperature are sent) stops the run at its
// first request: interrupted, exit code not 0, the endpoint's own message
// and parameter said, no node buggy, nothing more sent. Fixed, the run
// resumes and completes. A wrong key does the same.
func TestMisconfiguredEndpointStopsTheRun(t *testing.T) {
	t.Parallel()
	srv := fakellm.NewWith(t, fakellm.Options{Key: "test-key", Reasoning: func(m string) bool { return m == "house-reasoner" }},
		func(r fakellm.Request) fakellm.Reply {
			switch r.Kind {
			case "phase0":
				return fakellm.Reply{Content: fakellm.WithMemory("{}", fakellm.Plan("a script"))}
			case "draft":
				return fakellm.Reply{Content: fakellm.WithMemory("{}", runScript("echo 'METRIC score="+strconv.Itoa(r.KindN)+"'\n"))}
			}
			return fakellm.Reply{Content: "{}"}
		})
	idea := reasoningIdea(t)
	dir := filepath.Join(t.TempDir(), "run-refused")
	env := baseEnv(t, "OPENAI_BASE_URL="+srv.BaseURL(), "OPENAI_API_KEY=test-key", "HPCQ_LLM_MODEL=house-reasoner")
	out, code := run(t, env, "scheduler", "run", "--local", "--run-dir", dir, idea)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "interrupted (resume with --resume")
	require.Contains(t, out, "the endpoint refused the configuration (status 400 unsupported_parameter, parameter max_tokens)")
	require.Contains(t, out, "Use 'max_completion_tokens' instead")
	require.EqualValues(t, 1, srv.Arrivals(), "nothing is sent after the first refusal")
	require.NoFileExists(t, filepath.Join(dir, "nodes", "n0001", "result.json"), "no node ends for it")

	// Fixed (HPCQ_LLM_REASONING says what the name does not), it resumes
	// and completes.
	out, code = run(t, append(env, "HPCQ_LLM_REASONING=true"), "scheduler", "run", "--local", "--resume", dir)
	require.Equal(t, 0, code, out)
	requireNodesOK(t, dir, 2)

	// A wrong key stops a new run the same way, with OpenAI's message.
	bad := baseEnv(t, "OPENAI_BASE_URL="+srv.BaseURL(), "OPENAI_API_KEY=sk-wrong-key-1234", "HPCQ_LLM_MODEL=gpt-5.2")
	before := srv.Arrivals()
	out, code = run(t, bad, "scheduler", "run", "--local", "--run-dir", filepath.Join(t.TempDir(), "run-badkey"), idea)
	require.NotEqual(t, 0, code, out)
	require.Contains(t, out, "the endpoint refused the configuration (status 401 invalid_api_key)")
	require.Contains(t, out, "Incorrect API key provided: sk-*****1234")
	require.EqualValues(t, before+1, srv.Arrivals(), "one request, not retried")
}

// TestCheckProbe: `scheduler check` says what a run sends to its model;
// --probe asks the endpoint once (OpenAI's shape, then Azure's paths and
// key header) and prints what it accepted; a refused probe is an error.
func TestCheckProbe(t *testing.T) {
	t.Parallel()
	reply := func(fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Content: "ok", TokensIn: 12, TokensOut: 70, ReasoningTokens: 64}
	}
	idea := reasoningIdea(t)
	srv := fakellm.NewWith(t, fakellm.Options{Key: "test-key"}, reply)
	env := baseEnv(t, "OPENAI_BASE_URL="+srv.BaseURL(), "OPENAI_API_KEY=test-key", "HPCQ_LLM_MODEL=gpt-5.2")
	out, code := run(t, env, "scheduler", "check", idea)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "model:   gpt-5.2 at "+srv.BaseURL())
	require.Contains(t, out, "sends:   gpt-5.2, a reasoning model (by its name), to an OpenAI-compatible endpoint: max_completion_tokens, reasoning_effort, no temperature or top_p; replies streamed")
	require.Contains(t, out, "limits:  max_completion_tokens 8000 (up to 32000 when a reply is cut by reasoning), reasoning_effort low; llm.temperature 0.7 is not sent; each attempt capped at 20m0s, 1m30s between chunks")
	require.Zero(t, srv.Arrivals(), "check alone sends nothing")

	out, code = run(t, env, "scheduler", "check", "--probe", idea)
	require.Equal(t, 0, code, out)
	require.Regexp(t, `probe:   text: accepted in \d+ms, streamed; model "gpt-5.2" answered "ok" \(finish stop; 12 tokens in, 0 cached; 70 out, 64 reasoning; usage reported\)`, out)
	r := srv.Requests()[0]
	require.Equal(t, 2048, r.MaxCompletionTokens)
	require.Equal(t, "low", r.ReasoningEffort)

	out, code = run(t, append(env, "OPENAI_API_KEY=wrong"), "scheduler", "check", "--probe", idea)
	require.NotEqual(t, 0, code, out)
	require.Contains(t, out, "probe:   text: refused after")
	require.Contains(t, out, "status 401 invalid_api_key")

	azure := fakellm.NewWith(t, fakellm.Options{Key: "az-key", Azure: true}, reply)
	env = baseEnv(t, "OPENAI_BASE_URL="+azure.BaseURL(), "OPENAI_API_KEY=az-key", "HPCQ_LLM_MODEL=gpt-5.2", "HPCQ_LLM_ENDPOINT=azure")
	out, code = run(t, env, "scheduler", "check", "--probe", idea)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "to Azure OpenAI: max_completion_tokens")
	require.Contains(t, out, "POST /openai/deployments/gpt-5.2/chat/completions?api-version=2024-12-01-preview, api-key")
	require.Contains(t, out, "probe:   text: accepted")
	require.Equal(t, "/openai/deployments/gpt-5.2/chat/completions?api-version=2024-12-01-preview", azure.Requests()[0].Path)
}
