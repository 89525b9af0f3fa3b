package schema_test

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/schema"
)

// TestEvaluateValidation: a task's evaluator is refused, field named, for
// each way it can be wrong; a result's evaluation says no metric of an
// incorrect node and no number that is not one.
func TestEvaluateValidation(t *testing.T) {
	t.Parallel()
	task := func(ev *schema.Evaluate) *schema.NodeTask {
		return &schema.NodeTask{V: 1, RunID: "r1", NodeID: "n1", Attempt: 1, Pool: "cpu", Kind: schema.KindDraft,
			Artifacts: schema.Artifacts{Run: schema.RunPhase{Commands: []string{"./run"}}}, Evaluate: ev}
	}
	good := func() *schema.Evaluate {
		return &schema.Evaluate{Files: []schema.File{{Path: "eval.sh", Content: "#!/bin/sh\n"}}, Commands: []string{"sh eval.sh"},
			Inputs: []string{"N=1000"}, Stage: schema.EvalSearch, Repeats: 5}
	}
	require.NoError(t, task(good()).Validate())
	require.NoError(t, task(nil).Validate())
	for field, change := range map[string]func(*schema.Evaluate){
		"evaluate.commands":  func(e *schema.Evaluate) { e.Commands = nil },
		"evaluate.stage":     func(e *schema.Evaluate) { e.Stage = "final" },
		"evaluate.inputs":    func(e *schema.Evaluate) { e.Inputs = nil },
		"evaluate.repeats":   func(e *schema.Evaluate) { e.Repeats = schema.MaxEvalRepeats + 1 },
		"evaluate.timeout_s": func(e *schema.Evaluate) { e.TimeoutS = -1 },
		"evaluate.files[0]":  func(e *schema.Evaluate) { e.Files[0].Path = "" },
	} {
		ev := good()
		change(ev)
		err := task(ev).Validate()
		require.ErrorIs(t, err, schema.ErrInvalidMessage, field)
		require.ErrorContains(t, err, field)
	}
	for _, in := range []string{"", "N=1\nN=2", "\x1b[2J", strings.Repeat("x", schema.MaxEvalInputLen+1), "\xff"} {
		ev := good()
		ev.Inputs = []string{in}
		require.ErrorContains(t, task(ev).Validate(), "evaluate.inputs", "%q", in)
	}

	res := &schema.NodeResult{V: 1, RunID: "r1", NodeID: "n1", Attempt: 1, Worker: "w1"}
	m := 3.5
	res.Evaluation = &schema.Evaluation{Stage: schema.EvalSearch, Correct: true, Metric: &m}
	require.NoError(t, res.Validate())
	res.Evaluation.Correct = false
	require.ErrorContains(t, res.Validate(), "set for an incorrect node")
	res.Error = &schema.ResultError{Phase: schema.PhaseEvaluate, Kind: schema.ErrKindIncorrect, Message: "incorrect on N=10"}
	res.Evaluation.Metric = nil
	require.NoError(t, res.Validate())
}

func TestHostBoundValidate(t *testing.T) {
	ok := schema.HostBound{Host: "h", CPUs: 2, ClockGHz: 2.5, FlopsPerCycle: 16, PeakGFLOPS: 80, TriadGBs: 10}
	require.NoError(t, ok.Validate())
	for name, mut := range map[string]func(*schema.HostBound){
		"nan peak":       func(b *schema.HostBound) { b.PeakGFLOPS = math.NaN() },
		"zero clock":     func(b *schema.HostBound) { b.ClockGHz = 0 },
		"negative triad": func(b *schema.HostBound) { b.TriadGBs = -1 },
		"inf triad":      func(b *schema.HostBound) { b.TriadGBs = math.Inf(1) },
		"no cpus":        func(b *schema.HostBound) { b.CPUs = 0 },
	} {
		b := ok
		mut(&b)
		require.Error(t, b.Validate(), name)
		r := schema.NodeResult{V: schema.Version, RunID: "r", NodeID: "n1", Attempt: 1, Worker: "w", HostBound: &b}
		require.ErrorContains(t, r.Validate(), "host_bound", name)
	}
}
