package engine

import (
	"context"
	"regexp"

	"github.com/hpcq/hpcq/internal/prompt"
	"github.com/hpcq/hpcq/internal/run"
	"github.com/hpcq/hpcq/internal/textcut"
	"github.com/hpcq/hpcq/internal/tree"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// Seed 003's evaluation prompts, asked where the result alone cannot
// decide: the metrics parser when the scanners found no metric of the
// run's; the execution review when there is still none, or the run's
// output looks wrong; and a summary of every node that ran.

// suspicious: words in a run's output that exit code 0 and a metric do not
// rule out as a failure.
var suspicious = regexp.MustCompile(`(?i)\b(nan|-?inf|infinity|segmentation fault|core dumped|assertion|traceback|error|mismatch|incorrect|wrong result)\b`)

const defaultEvaluationBudget = 4000

func budgetOr(v int) int {
	if v > 0 {
		return v
	}
	return defaultEvaluationBudget
}

// assess completes o, the outcome of a run that ended without an error,
// with the model's judgement.
func (r *runner) assess(ctx context.Context, n *tree.Node, o rundir.Outcome) rundir.Outcome {
	e := r.e
	res := o.Result
	if res == nil || res.Error != nil || o.Cached || o.DeadLetter != nil || res.Evaluation.ByHarness() {
		return o // an evaluator judged it: the model reads no number of the program's own
	}
	ev, mcfg := e.s.Spec.Evaluation, e.s.Spec.Memory.Config
	if o.Metric == nil && run.On(ev.ParseMetrics) {
		text := textcut.Marked(e.outputText(o), budgetOr(mcfg.ParseMetricsBudgetChars))
		var metrics []prompt.ParsedMetric
		err := r.evaluation(ctx, n, prompt.ParseMetrics, text, `one JSON object {"metrics": [...]}`, func(s string) error {
			var err error
			metrics, err = prompt.ParseMetricsReply(s)
			return err
		})
		if err != nil {
			e.s.Log.Warn("metrics parser", "node_id", n.ID, "err", err)
		}
		for _, m := range metrics {
			if m.Name == e.s.Spec.Metric.Name {
				v := m.Value
				o.Metric, o.Buggy, o.Reason, o.MetricFrom = &v, false, "", string(prompt.ParseMetrics)
			}
		}
	}
	if run.On(ev.ExecutionReview) && (o.Metric == nil || suspicious.MatchString(runOutput(res))) {
		text := textcut.Marked(e.outputText(o), budgetOr(mcfg.MetricsExtractionBudgetChars))
		var rv prompt.Review
		err := r.evaluation(ctx, n, prompt.ExecutionReview, text, `one JSON object {"is_bug": ..., "summary": "..."}`, func(s string) error {
			var err error
			rv, err = prompt.ParseReview(s)
			return err
		})
		if err != nil {
			e.s.Log.Warn("execution review", "node_id", n.ID, "err", err)
			return o
		}
		o.Review = &rv
		switch {
		case o.Buggy:
			o.Reason += " (execution review: " + rv.Summary + ")"
		case rv.IsBug:
			o.Buggy, o.Reason = true, "execution review: "+rv.Summary
		}
	}
	return o
}

// summarize asks for the summary of a node that ran ("" when it could not
// be had: the run goes on).
func (r *runner) summarize(ctx context.Context, n *tree.Node, o rundir.Outcome) string {
	e := r.e
	if !run.On(e.s.Spec.Evaluation.NodeSummary) || o.Result == nil || o.Cached {
		return ""
	}
	var summary string
	err := r.evaluation(ctx, n, prompt.Summary, e.outputText(o), `one JSON object {"summary": "..."}`, func(s string) error {
		var err error
		summary, err = prompt.ParseSummary(s)
		return err
	})
	if err != nil {
		e.s.Log.Warn("node summary", "node_id", n.ID, "err", err)
		return ""
	}
	return textcut.Marked(summary, budgetOr(e.s.Spec.Memory.Config.NodeSummaryBudgetChars))
}

// evaluation asks one evaluation prompt of kind about node n's output,
// with its memory when the run has one; parse checks the payload (an
// unusable reply is retried with the reason, as node replies are).
func (r *runner) evaluation(ctx context.Context, n *tree.Node, kind prompt.Kind, output, shape string, parse func(string) error) error {
	e := r.e
	pc := e.promptContext(ctx)
	pc.ExecutionOutput = output
	if kind == prompt.Summary {
		pc.Code = e.nodeCode(n.ID)
	}
	if e.s.Memory != nil {
		rd, err := e.s.Memory.RenderForPrompt(ctx, n.ID, string(kind), 0)
		if err != nil {
			return err
		}
		pc.Memory = rd.Text
	}
	msgs, err := prompt.Build(kind, pc)
	if err != nil {
		return err
	}
	_, err = prompt.Ask(ctx, r.params(n, string(kind), msgs), shape, parse)
	return err
}

// runOutput is the log tail of a result's run phase.
func runOutput(res *schema.NodeResult) string {
	for _, ph := range res.Phases {
		if ph.Name == schema.PhaseRun {
			return ph.LogTail
		}
	}
	return ""
}
