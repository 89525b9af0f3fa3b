package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/fakellm"
	"github.com/hpcq/hpcq/internal/hostbound"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// TestImpossibleMetric: a draft prints a GFLOP/s no host can reach (a
// billion GFLOP/s, the program about itself); the run finds it beyond
// this host's peak, makes the node buggy with both numbers in its reason,
// hands that reason to the debug prompt, and never ranks the claim. The
// honest debug child is the best, with its share of the peak in
// result.json and the report.
func TestImpossibleMetric(t *testing.T) {
	t.Parallel()
	info, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		_, err = hostbound.ParseCPUInfo(info, 0)
	}
	if err != nil {
		t.Skipf("this host's peak cannot be read, so no bound is judged here: %v", err)
	}
	handle := func(r fakellm.Request) fakellm.Reply {
		switch r.Kind {
		case "phase0":
			return fakellm.Reply{Content: fakellm.WithMemory("{}", fakellm.Plan("a kernel"))}
		case "draft":
			return fakellm.Reply{Content: fakellm.WithMemory("{}", runScript("echo 'METRIC gflops=1e9'\n"))}
		case "debug":
			return fakellm.Reply{Content: fakellm.WithMemory("{}", runScript("echo 'METRIC gflops=0.5'\n"))}
		}
		return fakellm.Reply{Status: 400}
	}
	srv := fakellm.New(t, handle)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "idea.md"), []byte("# A fast kernel\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run.yaml"), []byte(`metric: {name: gflops, direction: maximize, unit: GFLOP/s}
stages: {initial_implementation: {max_iterations: 2}, baseline_tuning: {max_iterations: 0}, creative_research: {max_iterations: 0}, ablation_studies: {max_iterations: 0}}
search: {num_drafts: 1, slots: 1, debug_prob: 1}
llm: {model: test-model}
evaluation: {execution_review: false, parse_metrics: false, node_summary: false}
`), 0o644))
	runDir := filepath.Join(t.TempDir(), "run-bound")
	out, code := run(t, baseEnv(t, "OPENAI_BASE_URL="+srv.BaseURL(), "OPENAI_API_KEY=test-key"), "scheduler", "run", "--local",
		"--run-dir", runDir, dir)
	require.Equal(t, 0, code, out)

	o, ok, err := rundir.Dir(runDir).ReadOutcome("n0001")
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, o.Buggy)
	require.Nil(t, o.Metric, "the claim is never a metric")
	require.Equal(t, schema.ErrKindImpossible, o.ErrorKind)
	require.Regexp(t, `^impossible: gflops = 1e\+09 GFLOP/s \(the program's own report\) is [0-9.e+]+x what host \S+ can do at most, [0-9.]+ GFLOP/s \(peak: \d+ CPUs x `, o.Reason)
	require.True(t, o.Bound.Impossible)

	best, ok, err := rundir.Dir(runDir).ReadOutcome("n0002")
	require.NoError(t, err)
	require.True(t, ok)
	require.False(t, best.Buggy, best.Reason)
	require.NotNil(t, best.Bound)
	require.Greater(t, best.Bound.Share, 0.0)
	require.Contains(t, out, "best n0002")

	debugs := 0
	for _, r := range srv.Requests() {
		if r.Kind == "debug" {
			debugs++
			require.Contains(t, r.Last(), "impossible: gflops = 1e+09 GFLOP/s", "the debug prompt is told why")
		}
	}
	require.Equal(t, 1, debugs)

	report := mustRead(t, filepath.Join(runDir, "report.md"))
	require.Contains(t, report, "impossible")
	require.True(t, strings.Contains(report, "of this host's peak") || strings.Contains(report, "of the bound"), report)
}

// TestRepeatedRunPhase: without a harness, a node's timed metric is the
// median of its program's reports over a warm-up and five measured runs,
// its spread beside it: in result.json, the samples table (every run),
// the nodes row and `scheduler ls`. Asked to, the task ran alone on its
// worker, and its result says so.
func TestRepeatedRunPhase(t *testing.T) {
	t.Parallel()
	srv := draftsLLM(t, func(int) string {
		return runScript("n=$(cat runs 2>/dev/null || echo 0); echo $((n + 1)) > runs\nset -- 90 4 1 3 2 5 7; shift $n; echo \"METRIC t=$1 ms\"\n")
	})
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "idea.md"), []byte("# A fast loop\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run.yaml"), []byte(`metric: {name: t, direction: minimize, unit: ms}
stages: {initial_implementation: {max_iterations: 1}, baseline_tuning: {max_iterations: 0}, creative_research: {max_iterations: 0}, ablation_studies: {max_iterations: 0}}
search: {num_drafts: 1, slots: 1}
llm: {model: test-model}
evaluation: {exclusive: true}
`), 0o644))
	runDir := filepath.Join(t.TempDir(), "run-repeats")
	env := baseEnv(t, "OPENAI_BASE_URL="+srv.BaseURL(), "OPENAI_API_KEY=test-key")
	out, code := run(t, env, "scheduler", "run", "--local", "--run-dir", runDir, dir)
	require.Equal(t, 0, code, out)

	o, ok, err := rundir.Dir(runDir).ReadOutcome("n0001")
	require.NoError(t, err)
	require.True(t, ok)
	require.False(t, o.Buggy, o.Reason)
	require.Equal(t, 3.0, *o.Metric, "the median of 4, 1, 3, 2, 5; the warm-up's 90 left out")
	require.Equal(t, rundir.MetricFromRepeats, o.MetricFrom)
	require.NotNil(t, o.Spread)
	require.Equal(t, 5, o.Spread.N)
	require.Equal(t, schema.ExclusiveWorker, o.Result.Exclusive, "run.yaml asked for it alone")

	q, code := run(t, env, "scheduler", "query", "--run-dir", runDir, "--format", "csv",
		"SELECT repeat, value, stage FROM samples WHERE node = 'n0001' ORDER BY repeat")
	require.Equal(t, 0, code, q)
	require.Contains(t, q, "0,90,run\n1,4,run\n2,1,run\n3,3,run\n4,2,run\n5,5,run\n")
	q, code = run(t, env, "scheduler", "query", "--run-dir", runDir, "--format", "csv",
		"SELECT metric_value, metric_from, metric_low IS NOT NULL FROM nodes WHERE node = 'n0001'")
	require.Equal(t, 0, code, q)
	require.Contains(t, q, "3,repeats,1\n")
	ls, code := run(t, env, "scheduler", "ls", "--run-dir", runDir)
	require.Equal(t, 0, code, ls)
	require.Contains(t, ls, "(median of 5 runs)")
	require.Contains(t, mustRead(t, filepath.Join(runDir, "report.md")),
		"**Best node: n0001**, t = 3 ms (minimized). The median of repeated measurements: half of them within 2 to 4 ms.")
}
