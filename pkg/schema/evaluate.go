package schema

import (
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

// PhaseEvaluate is the phase in which the idea's evaluator (a harness the
// user writes) measures the node's built files: after the task's own
// phases, in a sandbox of its own. PhaseEvaluateQuick is its cheap first
// pass (Evaluate.Quick): correctness on small inputs, before anything is
// measured.
const (
	PhaseEvaluate      = "evaluate"
	PhaseEvaluateQuick = "evaluate_quick"
)

// Error kinds of the evaluate phase.
const (
	// ErrKindIncorrect: the harness found the node's result wrong (its
	// message is the harness's: the input, the error it measured).
	ErrKindIncorrect = "incorrect"
	// ErrKindEvaluateFailed: the harness could not evaluate the node (it
	// exited non-zero, timed out, or wrote no report hpcq takes).
	ErrKindEvaluateFailed = "evaluate_failed"
)

// Stages of an evaluation.
const (
	EvalQuick   = "quick"    // one small input, correctness only: a wrong node costs seconds
	EvalSearch  = "search"   // the inputs the search ranks nodes by
	EvalHeldOut = "held_out" // inputs no prompt, memory or node saw, once the search ends
	// EvalRun: no evaluator; the run phase repeated (NodeTask.Measure),
	// its metric the program's own report of each run.
	EvalRun = "run"
)

// Limits of an evaluation's task.
const (
	MaxEvalInputs   = 64
	MaxEvalInputLen = 200
	MaxEvalRepeats  = 100
)

// Evaluate is the idea's evaluator for one task: a harness whose files
// are written, after the task's own phases, into a workspace of their own
// (never the node's: its program cannot read or change them), and whose
// commands run there with the node's workspace read-only under HPCQ_NODE.
// The contract (HPCQ_INPUTS, HPCQ_STAGE, HPCQ_REPEATS, HPCQ_EVAL_REPORT)
// is internal/evaluate's, documented in docs/evaluation.md.
type Evaluate struct {
	Files    []File   `json:"files"`
	Commands []string `json:"commands"`
	// Inputs are what the harness is asked to measure, one per line of
	// HPCQ_INPUTS (an input's meaning is the harness's: "N=1000").
	Inputs []string `json:"inputs"`
	// Quick, when set, are inputs of a first pass (HPCQ_STAGE quick,
	// HPCQ_REPEATS 1): correctness only; a node wrong on them is not
	// measured (a wrong node costs seconds, not the full evaluation).
	Quick []string `json:"quick,omitempty"`
	Stage string   `json:"stage"`
	// Repeats is how many times each input is measured (HPCQ_REPEATS,
	// besides warm-ups; 0: the harness's choice).
	Repeats  int `json:"repeats,omitempty"`
	TimeoutS int `json:"timeout_s,omitempty"`
}

// Validate checks an evaluator's fields; nil is none. Its files are
// checked against the worker's limits where they are written (CheckFiles).
func (ev *Evaluate) Validate() error {
	if ev == nil {
		return nil
	}
	if len(ev.Commands) == 0 {
		return fieldErr("evaluate.commands", "none: the harness needs a command that runs it")
	}
	if err := checkCommands("evaluate.commands", ev.Commands); err != nil {
		return err
	}
	switch ev.Stage {
	case EvalQuick, EvalSearch, EvalHeldOut:
	default:
		return fieldErr("evaluate.stage", "%q, must be %s, %s or %s", ev.Stage, EvalQuick, EvalSearch, EvalHeldOut)
	}
	if len(ev.Inputs) == 0 || len(ev.Inputs) > MaxEvalInputs {
		return fieldErr("evaluate.inputs", "%d, must be 1 to %d", len(ev.Inputs), MaxEvalInputs)
	}
	if len(ev.Quick) > MaxEvalInputs {
		return fieldErr("evaluate.quick", "%d, at most %d", len(ev.Quick), MaxEvalInputs)
	}
	for field, inputs := range map[string][]string{"evaluate.inputs": ev.Inputs, "evaluate.quick": ev.Quick} {
		for _, in := range inputs {
			if in == "" || len(in) > MaxEvalInputLen || !utf8.ValidString(in) || strings.IndexFunc(in, unicode.IsControl) >= 0 {
				return fieldErr(field, "%q: 1 to %d bytes of UTF-8 without control characters (one line each)", in, MaxEvalInputLen)
			}
		}
	}
	if ev.Repeats < 0 || ev.Repeats > MaxEvalRepeats {
		return fieldErr("evaluate.repeats", "%d, must be 0 to %d", ev.Repeats, MaxEvalRepeats)
	}
	if ev.TimeoutS < 0 {
		return fieldErr("evaluate.timeout_s", "%d, must be >= 0", ev.TimeoutS)
	}
	if len(ev.Files) > MaxFiles {
		return fieldErr("evaluate.files", "%d files, at most %d", len(ev.Files), MaxFiles)
	}
	for i, f := range ev.Files {
		if f.Path == "" {
			return fieldErr(fmt.Sprintf("evaluate.files[%d].path", i), "is required")
		}
	}
	return nil
}

// EvalSample is one line of a harness's report: one repeat of one input
// (repeat 0: a warm-up, not kept for the metric).
type EvalSample struct {
	Input  string `json:"input"`
	Repeat int    `json:"repeat"`
	// Correct is the harness's check of the node's result against its
	// reference; Error and Tolerance what it measured and allowed.
	Correct   bool     `json:"correct"`
	Error     *float64 `json:"error,omitempty"`
	Tolerance *float64 `json:"tolerance,omitempty"`
	// Metric is the harness's own measure of the run's metric for this
	// repeat (required of a correct repeat).
	Metric *float64 `json:"metric,omitempty"`
	Unit   string   `json:"unit,omitempty"`
	Note   string   `json:"note,omitempty"`
}

// Evaluation is what the evaluate phase found: the harness's samples and
// its verdict. With one, a node's metric is the harness's, never the
// program's own (NodeResult.Metrics stay, as what it reported of itself).
type Evaluation struct {
	Stage   string       `json:"stage"`
	Samples []EvalSample `json:"samples,omitempty"`
	// Correct: every input asked for was measured and every repeat was
	// right; otherwise Reason says why, in the harness's words.
	Correct bool   `json:"correct"`
	Reason  string `json:"reason,omitempty"`
	// Metric is the median of each input's kept repeats (over several
	// inputs, their geometric mean); nil unless Correct.
	Metric *float64 `json:"metric,omitempty"`
	Unit   string   `json:"unit,omitempty"`
	// Spread is the metric's noise, from the kept repeats (nil with
	// fewer than 2 a input, or unless Correct).
	Spread *Spread `json:"spread,omitempty"`
	// DurationMS is the phase's, harness build included.
	DurationMS int64 `json:"duration_ms"`
}

// ByHarness: the evaluation is the idea's evaluator's (not the run phase
// repeated, EvalRun).
func (ev *Evaluation) ByHarness() bool { return ev != nil && ev.Stage != EvalRun }

// Spread is how a metric made of repeated measurements varies: Q1 and Q3
// (the quartiles, over several inputs combined as the metric is), and a
// 95% bootstrap interval of the metric itself (Low, High).
type Spread struct {
	Q1   float64 `json:"q1"`
	Q3   float64 `json:"q3"`
	Low  float64 `json:"low"`
	High float64 `json:"high"`
	// N is the repeats the metric is made of.
	N int `json:"n"`
}

// IQR is Q3 - Q1.
func (s *Spread) IQR() float64 { return s.Q3 - s.Q1 }

// check: finite, ordered bounds.
func (s *Spread) check() error {
	for _, v := range []float64{s.Q1, s.Q3, s.Low, s.High} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fieldErr("evaluation.spread", "not finite")
		}
	}
	if s.Q1 > s.Q3 || s.Low > s.High || s.N < 2 {
		return fieldErr("evaluation.spread", "q1 <= q3, low <= high and n >= 2 are required")
	}
	return nil
}

// Validate checks what a worker reports of an evaluation.
func (ev *Evaluation) Validate() error {
	if ev == nil {
		return nil
	}
	if ev.Metric != nil && (math.IsNaN(*ev.Metric) || math.IsInf(*ev.Metric, 0)) {
		return fieldErr("evaluation.metric", "not a finite number")
	}
	if ev.Metric != nil && !ev.Correct {
		return fieldErr("evaluation.metric", "set for an incorrect node")
	}
	if ev.Spread != nil {
		if ev.Metric == nil {
			return fieldErr("evaluation.spread", "set without a metric")
		}
		if err := ev.Spread.check(); err != nil {
			return err
		}
	}
	return nil
}
