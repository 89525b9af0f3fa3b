package engine

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/fakellm"
	"github.com/hpcq/hpcq/internal/run"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// evalHarness writes an idea's harness: it runs the node's sum.sh on each
// input against its own reference (the sum of 1..N) and reports, as its
// metric, a number it measures itself (here: 1000 less the bytes of the
// node's sum.sh, so that the test is deterministic).
func evalHarness(t *testing.T) *run.Harness {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "eval.sh"), []byte(`#!/bin/sh
: > "$HPCQ_EVAL_REPORT"
size=$(wc -c < "$HPCQ_NODE/sum.sh")
printf '%s\n' "$HPCQ_INPUTS" | while IFS== read -r name n; do
	want=$(( n * (n + 1) / 2 ))
	got=$(sh "$HPCQ_NODE/sum.sh" "$n")
	if [ "$got" = "$want" ]; then
		printf '{"input":"N=%s","repeat":1,"correct":true,"metric":%d,"unit":"points"}\n' "$n" $((1000 - size)) >> "$HPCQ_EVAL_REPORT"
	else
		printf '{"input":"N=%s","repeat":1,"correct":false,"note":"got %s, want %s"}\n' "$n" "$got" "$want" >> "$HPCQ_EVAL_REPORT"
	fi
done
`), 0o755))
	one := 1
	return &run.Harness{Dir: dir, Commands: []string{"sh eval.sh"}, Inputs: []string{"N=50"}, Repeats: &one}
}

// sumNode is a node whose run leaves sum.sh and prints a score about itself.
func sumNode(sum string, claims int) string {
	return fakellm.Artifacts([]fakellm.File{{Path: "sum.sh", Content: sum}, {Path: "run.sh", Content: "echo 'METRIC score=" + strconv.Itoa(claims) + " points'\n"}},
		nil, []string{"bash run.sh"})
}

// TestEvaluatorDecides: with the idea's harness, the node that prints a
// fine number without doing the work is buggy with the harness's words
// (and they reach its debug prompt), the honest node's metric is the
// harness's (its own number kept beside it, self-reported), and the run's
// best is the honest one.
func TestEvaluatorDecides(t *testing.T) {
	t.Parallel()
	spec := newSpec(t)
	spec.Stages.InitialImplementation.MaxIterations, spec.Search.NumDrafts, spec.Search.Slots = 3, 2, 1
	one := 1.0
	spec.Search.DebugProb = &one
	spec.Evaluation.Harness = evalHarness(t)
	var mu sync.Mutex
	var debugPrompt string
	handle := func(r fakellm.Request) fakellm.Reply {
		switch {
		case r.Kind == "draft" && r.KindN == 1: // the liar: no work, a fine claim
			return fakellm.Reply{Content: fakellm.WithMemory(emptyUpdate, sumNode("echo 42\n", 5000))}
		case r.Kind == "draft": // honest
			return fakellm.Reply{Content: fakellm.WithMemory(emptyUpdate, sumNode("n=$1; echo $(( n * (n + 1) / 2 ))\n", 1))}
		case r.Kind == "debug":
			mu.Lock()
			debugPrompt = r.Messages[len(r.Messages)-1].Content
			mu.Unlock()
			return fakellm.Reply{Content: fakellm.WithMemory(emptyUpdate, sumNode("n=$1\necho $(( n * (n + 1) / 2 ))\n", 7))}
		}
		return normal(r)
	}
	e := setup(t, spec, handle, "")
	sum, err := runEngine(t, context.Background(), e.sp, e.p)
	require.NoError(t, err)
	require.Equal(t, 3, sum.Nodes)

	liar := readOutcome(t, e.dir, "n0001")
	require.True(t, liar.Buggy)
	require.Contains(t, liar.Reason, "incorrect on N=50 (repeat 1): got 42, want 1275")
	require.Nil(t, liar.Metric)
	require.Equal(t, 5000.0, liar.Result.Metrics["score"], "what it said of itself is kept, in its result")

	honest := readOutcome(t, e.dir, "n0002")
	require.False(t, honest.Buggy, honest.Reason)
	require.Equal(t, rundir.MetricFromEvaluator, honest.MetricFrom)
	require.NotNil(t, honest.Metric)
	require.Equal(t, float64(1000-len("n=$1; echo $(( n * (n + 1) / 2 ))\n")), *honest.Metric, "the harness's measure")
	require.Equal(t, 1.0, *honest.SelfReported)

	mu.Lock()
	require.Contains(t, debugPrompt, "incorrect on N=50 (repeat 1): got 42, want 1275", "the harness's words reach the debug prompt")
	mu.Unlock()
	require.True(t, sum.HasBest)
	require.NotEqual(t, "n0001", sum.Best.ID, "the liar's 5000 ranks nothing")
}
