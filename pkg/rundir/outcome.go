package rundir

import (
	"encoding/json"
	"time"

	"github.com/hpcq/hpcq/pkg/schema"
)

// MetricFromEvaluator is Outcome.MetricFrom of a metric the idea's
// evaluator measured (docs/evaluation.md).
const MetricFromEvaluator = "evaluator"

// MetricFromRepeats is Outcome.MetricFrom of a metric that is the median
// of the program's own reports over its measured runs (run.yaml
// evaluation.repeats, without a harness).
const MetricFromRepeats = "repeats"

// Outcome is a node's result.json: how the node ended. The engine of a
// tree search and `scheduler exec` write it, once per node, when the node
// ends; `scheduler ls`, the dashboard, the report and a resume read it.
// results.jsonl of an exec holds one per line.
type Outcome struct {
	Node    string `json:"node_id"`
	Attempt int    `json:"attempt,omitempty"`
	// Status and ErrorKind are StatusOf's, written with the rest (the
	// nodes row of the results tables carries the same).
	Status    string `json:"status"`
	ErrorKind string `json:"error_kind,omitempty"`
	// Buggy: the node failed (its task, its metric, or it never ran). A
	// tree search's verdict; an exec's failed tasks are Buggy too.
	Buggy bool `json:"buggy"`
	// NotRun: the node never ran (the model gave nothing usable, the budget
	// was spent, or it was canceled before it ran).
	NotRun bool   `json:"not_run,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Metric is the node's value of the run's metric, when it has one.
	Metric *float64 `json:"metric,omitempty"`
	// Cached: the result of an identical node was reused.
	Cached bool `json:"cached,omitempty"`
	// Canceled: scheduler cancel stopped the node (before or while it ran).
	Canceled   bool               `json:"canceled,omitempty"`
	Result     *schema.NodeResult `json:"result,omitempty"`
	DeadLetter *DeadLetter        `json:"dead_letter,omitempty"`
	// ArtifactsError says which files of the result could not be fetched
	// into the node's directory, and why.
	ArtifactsError string `json:"artifacts_error,omitempty"`
	// MetricFrom says where the metric came from when not from the run's
	// own METRIC lines or patterns ("parse_metrics": the model read it;
	// MetricFromEvaluator: the idea's harness measured it).
	MetricFrom string `json:"metric_from,omitempty"`
	// SelfReported is the run's metric as the program reported it itself,
	// when an evaluator measured Metric: shown beside it, never ranked.
	SelfReported *float64 `json:"self_reported,omitempty"`
	// Spread is the metric's noise when it was measured by repeats (the
	// evaluator's): its quartiles and 95% bootstrap interval.
	Spread *schema.Spread `json:"spread,omitempty"`
	// Bound is the metric's limit on the host that measured it (the
	// host's peak FLOP/s or memory bandwidth, docs/evaluation.md), when the
	// run's metric has one and the host said it.
	Bound *Bound `json:"bound,omitempty"`
	// Review is the execution review's verdict, when one was asked.
	Review *Review `json:"review,omitempty"`
	// Summary is the model's summary of the node (node_summary).
	Summary string `json:"summary,omitempty"`
	// PlotAnalysis is the vision model's analysis of the node's plots.
	PlotAnalysis string `json:"plot_analysis,omitempty"`
}

// Bound is a node's metric set against what its host can do.
type Bound struct {
	Host string `json:"host"`
	// Limit is the metric's highest possible value there, in Unit; How
	// what it is made of ("peak: 2 CPUs x 3.89 GHz ... x 32 FLOP/cycle").
	Limit float64 `json:"limit"`
	Unit  string  `json:"unit,omitempty"`
	How   string  `json:"how"`
	// Share is the metric's share of Limit (0.25: a quarter of the peak).
	Share float64 `json:"share"`
	// Impossible: the metric (Claimed, the program's own or the harness's)
	// is beyond Limit: the node is buggy and never ranked.
	Impossible bool     `json:"impossible,omitempty"`
	Claimed    *float64 `json:"claimed,omitempty"`
}

// DeadLetter is what a node's dead-lettered task left: where, why, after
// how many deliveries, on which worker last.
type DeadLetter struct {
	Pool       string    `json:"pool"`
	Reason     string    `json:"reason"`
	Deliveries uint64    `json:"deliveries"`
	Worker     string    `json:"worker,omitempty"`
	Time       time.Time `json:"time"`
}

// Review is the execution review of a node's run (prompt: the judge).
type Review struct {
	IsBug           bool   `json:"is_bug"`
	Summary         string `json:"summary"`
	MetricPlausible *bool  `json:"metric_plausible,omitempty"`
}

// StatusOf is the node's status and error kind: the one reading of an
// outcome, for its result.json, its nodes row, `scheduler ls` and the
// dashboard.
func (o *Outcome) StatusOf() (status, errKind string) {
	r := o.Result
	switch {
	case o.Canceled || r != nil && r.Error != nil && r.Error.Kind == schema.ErrKindCanceled:
		return schema.NodeCanceled, schema.ErrKindCanceled
	case o.DeadLetter != nil:
		return schema.NodeDeadLettered, schema.ErrKindDeadLetter
	case r != nil && r.Error != nil:
		return schema.NodeFailed, r.Error.Kind
	case o.NotRun:
		return schema.NodeNotRun, schema.ErrKindLLM
	case o.Buggy && o.Bound != nil && o.Bound.Impossible:
		return schema.NodeFailed, schema.ErrKindImpossible
	case o.Buggy && r != nil:
		return schema.NodeFailed, schema.ErrKindMetric
	case o.Cached:
		return schema.NodeCached, ""
	case r == nil && o.Metric == nil: // no answer came, or its task could not be published
		return schema.NodeNoAnswer, ""
	}
	return schema.NodeOK, ""
}

// Seal sets Status and ErrorKind from the rest: a writer calls it last.
func (o *Outcome) Seal() {
	o.Status, o.ErrorKind = o.StatusOf()
}

// UnmarshalJSON reads an outcome of any hpcq version: a tree search's
// result.json named the node "node" before this type (as task.json and the
// result messages do, it is "node_id" now), and one written before Status
// was recorded gets it from StatusOf.
func (o *Outcome) UnmarshalJSON(data []byte) error {
	type plain Outcome
	var v struct {
		plain
		OldNode string `json:"node"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*o = Outcome(v.plain)
	if o.Node == "" {
		o.Node = v.OldNode
	}
	if o.Status == "" {
		o.Seal()
	}
	return nil
}
