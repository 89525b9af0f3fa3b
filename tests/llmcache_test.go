package tests

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/fakellm"
)

// TestLLMCacheAcrossRuns: two runs of an idea at temperature 0 share
// HPCQ_LLM_CACHE: the second asks the endpoint (which counts what it
// receives) only what the first did not ask; what it does not ask is an
// llm_calls row with cache_hit and no cost. (Without memory: the memory
// section of a prompt shows its events' times, so such prompts repeat
// within a run, as a resume asks them again, not across runs.)
func TestLLMCacheAcrossRuns(t *testing.T) {
	t.Parallel()
	srv := fakellm.New(t, func(r fakellm.Request) fakellm.Reply {
		switch r.Kind {
		case "phase0":
			return fakellm.Reply{Content: fakellm.Plan("a script")}
		case "draft":
			return fakellm.Reply{Content: runScript("echo 'METRIC score=" + strconv.Itoa(r.KindN) + "'\n")}
		}
		return fakellm.Reply{Status: 400}
	})
	idea := ideaDir(t, "Print a score", `metric: {name: score, direction: maximize}
stages:
  initial_implementation: {max_iterations: 2}
  baseline_tuning: {max_iterations: 0}
  creative_research: {max_iterations: 0}
  ablation_studies: {max_iterations: 0}
search: {num_drafts: 2, slots: 1}
llm: {model: test-model, temperature: 0}
memory: {enabled: false}
`)
	env := baseEnv(t, "OPENAI_BASE_URL="+srv.BaseURL(), "OPENAI_API_KEY=test-key", "HPCQ_LLM_CACHE="+t.TempDir())
	var asked []int
	for i, name := range []string{"run-cache-1", "run-cache-2"} {
		before := len(srv.Requests())
		dir := filepath.Join(t.TempDir(), name)
		out, code := run(t, env, "scheduler", "run", "--local", "--run-dir", dir, idea)
		require.Equal(t, 0, code, out)
		asked = append(asked, len(srv.Requests())-before)

		q, code := run(t, env, "scheduler", "query", "--run-dir", dir, "--format", "csv",
			"SELECT count(*) AS calls, coalesce(sum(cache_hit), 0) AS hits, coalesce(sum(CASE WHEN cache_hit THEN cost_usd ELSE 0 END), 0) AS hit_cost FROM llm_calls")
		require.Equal(t, 0, code, q)
		f := strings.Split(strings.Split(strings.TrimSpace(q), "\n")[1], ",")
		calls, _ := strconv.Atoi(f[0])
		hits, _ := strconv.Atoi(f[1])
		t.Logf("%s: %d calls, %d from the cache, %d asked of the endpoint", name, calls, hits, asked[i])
		require.Equal(t, calls, hits+asked[i], "every call was asked or served from the cache")
		if i == 1 {
			require.Positive(t, hits, "the second run is served what the first asked")
			require.Equal(t, "0", f[2], "a hit costs nothing")
		}
	}
	require.Less(t, asked[1], asked[0])
}
