package run

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/schema"
)

func write(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	return p
}

func TestLoadSpec(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "idea.md", "# 2-D Jacobi stencil\nMaximize GFLOP/s with OpenMP.\n")
	p := write(t, dir, "run.yaml", `
title: stencil
idea_file: idea.md
requires: [openmp]
metric: {name: gflops, direction: maximize, unit: GFLOP/s}
stages:
  baseline_tuning: {max_iterations: 2}
search: {num_drafts: 2, debug_prob: 0.25}
llm:
  model: gpt-x
  temperature: 0.2
  prices: {gpt-x: {in_per_mtok: 2, out_per_mtok: 8}}
  budget: {max_cost_usd: 5}
memory:
  recall_max_events: 10
  section_budgets: {archival_snippet: 2000}
limits: {run_timeout_s: 300, compile_timeout_s: 120}
resources: resources.yaml
`)
	s, err := LoadSpec(p)
	require.NoError(t, err)
	require.Contains(t, s.Idea, "Jacobi")
	require.Equal(t, "cpu", s.Pool, "default")
	require.Equal(t, 8, s.Stages.InitialImplementation.MaxIterations, "default")
	require.Equal(t, 2, s.Stages.BaselineTuning.MaxIterations)
	require.Equal(t, 0.25, *s.Search.DebugProb)
	require.Equal(t, 3, s.Search.MaxDebugDepth, "default")
	require.Equal(t, 5.0, s.LLM.Budget.MaxCostUSD)
	require.Equal(t, 8.0, s.LLM.Prices["gpt-x"].OutPerMTok)
	require.Equal(t, 10, s.Memory.RecallMaxEvents)
	require.Equal(t, 16000, s.Memory.CoreMaxChars, "the memory's default")
	require.Equal(t, 2000, s.Memory.SectionBudgets["archival_snippet"])
	require.True(t, *s.Memory.Enabled)
	require.Equal(t, 300, s.Limits.RunTimeoutS)
	require.Equal(t, filepath.Join(dir, "resources.yaml"), s.Resources)
	require.Equal(t, "iterative", s.Phase1.Mode)
}

func TestLoadSpecRejects(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct{ yaml, want string }{
		"no idea":         {"metric: {name: g}", "idea: is required"},
		"no metric":       {"idea: x", "metric.name: is required"},
		"bad direction":   {"idea: x\nmetric: {name: g, direction: up}", `metric.direction: "up"`},
		"unknown key":     {"idea: x\nmetric: {name: g}\nserach: {}", "field serach not found"},
		"nested unknown":  {"idea: x\nmetric: {name: g}\nsearch: {drafts: 3}", "field drafts not found"},
		"bad prob":        {"idea: x\nmetric: {name: g}\nsearch: {debug_prob: 1.5}", "search.debug_prob: 1.5"},
		"bad mode":        {"idea: x\nmetric: {name: g}\nphase1: {mode: yolo}", `phase1.mode: "yolo"`},
		"bad memory":      {"idea: x\nmetric: {name: g}\nmemory: {use_fts: \"false\"}", "use_fts: false"},
		"bad limits":      {"idea: x\nmetric: {name: g}\nlimits: {run_timeout_s: -1}", "limits.run_timeout_s"},
		"both ideas":      {"idea: x\nidea_file: y.md\nmetric: {name: g}", "idea and idea_file"},
		"missing file":    {"idea_file: nope.md\nmetric: {name: g}", "idea_file"},
		"bad pool":        {"idea: x\nmetric: {name: g}\npool: \"a b\"", "pool"},
		"not yaml":        {"idea: [", "run.yaml"},
		"no stage 1":      {"idea: x\nmetric: {name: g}\nstages: {initial_implementation: {max_iterations: 0}}", "at least 1"},
		"bad price":       {"idea: x\nmetric: {name: g}\nllm: {prices: {m: {in_per_mtok: -1}}}", "llm.prices.m"},
		"bound of a time": {"idea: x\nmetric: {name: t, direction: maximize, unit: s, bound: flops}", "metric.bound: flops needs a unit of FLOP/s"},
		"bound minimized": {"idea: x\nmetric: {name: g, direction: minimize, unit: GFLOP/s, bound: flops}", "metric.bound: flops bounds a rate from above"},
		"roofline no AI":  {"idea: x\nmetric: {name: g, direction: maximize, unit: GFLOP/s, bound: roofline}", "metric.intensity"},
		"unknown bound":   {"idea: x\nmetric: {name: g, direction: maximize, unit: GFLOP/s, bound: peak}", `metric.bound: "peak"`},
		"writeup rounds":  {"idea: x\nmetric: {name: g}\nwriteup: {enabled: true, max_rounds: 50}", "writeup.max_rounds: 50"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := LoadSpec(write(t, dir, "run.yaml", tc.yaml))
			require.ErrorIs(t, err, ErrSpec)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestLoadIdeaDir(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run.yaml"), []byte("metric: {name: gflops}\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "idea.md"), []byte("# Fast stencil\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "resources.yaml"), []byte("[]\n"), 0o644))
	s, err := LoadIdeaDir(dir)
	require.NoError(t, err)
	require.Equal(t, "# Fast stencil\n", s.Idea)
	require.Equal(t, filepath.Join(dir, "resources.yaml"), s.Resources)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "run.yaml"), []byte("metric: {name: gflops}\nidea: inline\n"), 0o644))
	s, err = LoadIdeaDir(dir)
	require.NoError(t, err)
	require.Equal(t, "inline", s.Idea, "run.yaml's idea wins over idea.md")
}

// TestContainerSpec: run.yaml's container image is resolved against the
// file's directory; a digest of another shape is refused.
func TestContainerSpec(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) error {
		require.NoError(t, os.WriteFile(filepath.Join(dir, SpecFile), []byte("idea: x\nmetric: {name: score}\n"+body), 0o644))
		_, err := LoadIdeaDir(dir)
		return err
	}
	require.NoError(t, write("container: {image: images/gcc.sif}\n"))
	s, err := LoadIdeaDir(dir)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "images/gcc.sif"), s.Container.Image)
	require.Equal(t, filepath.Join(dir, "images/gcc.sif"), s.Container.Task().Image)
	require.ErrorContains(t, write("container: {image: x.sif, digest: md5:abc}\n"), "container.digest")
	require.ErrorContains(t, write("container: {image: \"\"}\n"), "container.image")
	require.ErrorContains(t, write("container: {image: x.sif, runtime: docker}\n"), "runtime")
}

// TestMeasureDefaults: without a harness a timed metric is measured
// DefaultRepeats times after a warm-up, a score once; run.yaml says
// otherwise; a harness measures itself.
func TestMeasureDefaults(t *testing.T) {
	dir := t.TempDir()
	load := func(yaml string) *Spec {
		s, err := LoadSpec(write(t, dir, "run.yaml", yaml))
		require.NoError(t, err)
		return &s
	}
	m := load("idea: x\nmetric: {name: gflops, direction: maximize, unit: GFLOP/s}").Measure()
	require.Equal(t, &schema.Measure{Metric: "gflops", Repeats: DefaultRepeats}, m)
	require.NotNil(t, load("idea: x\nmetric: {name: t, direction: minimize, unit: ms}").Measure())
	require.NotNil(t, load("idea: x\nmetric: {name: r, direction: maximize, unit: MLUP/s}").Measure())
	require.Nil(t, load("idea: x\nmetric: {name: score, direction: maximize}").Measure(), "a score is not a timing")
	require.Nil(t, load("idea: x\nmetric: {name: gflops, direction: maximize, unit: GFLOP/s}\nevaluation: {repeats: 1}").Measure())
	require.Equal(t, 3, load("idea: x\nmetric: {name: score, direction: maximize}\nevaluation: {repeats: 3}").Measure().Repeats)
	_, err := LoadSpec(write(t, dir, "run.yaml", "idea: x\nmetric: {name: g, direction: maximize}\nevaluation: {repeats: 0}"))
	require.ErrorContains(t, err, "evaluation.repeats: 0")
}
