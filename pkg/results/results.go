package results

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// Row types, one per table. TS is when the row's event happened.
type (
	Run struct {
		Run    string `json:"run"`
		Status string `json:"status"`
		Title  string `json:"title"`
		// Mode is local or cluster.
		Mode string `json:"mode"`
		// Config is the run's configuration as JSON, without secrets.
		Config string    `json:"config"`
		TS     time.Time `json:"ts"`
	}
	Node struct {
		Run        string `json:"run"`
		Node       string `json:"node"`
		Parent     string `json:"parent"`
		Stage      int    `json:"stage"`
		Kind       string `json:"kind"`
		Pool       string `json:"pool"`
		Attempt    int    `json:"attempt"`
		Status     string `json:"status"`
		ErrorKind  string `json:"error_kind"`
		MetricName string `json:"metric_name"`
		// MetricValue is nil (NULL in the table) when the node has no value
		// of its metric: it failed, never ran, or did not report it.
		MetricValue *float64  `json:"metric_value"`
		TS          time.Time `json:"ts"`
		// MetricFrom says who measured MetricValue: "evaluator" (the
		// idea's harness), else "" (the program, about itself);
		// SelfReported is then what the program said (never ranked).
		MetricFrom   string   `json:"metric_from"`
		SelfReported *float64 `json:"self_reported"`
		// HeldOut is the node's verdict at the held-out gate (held,
		// overfit, incorrect, failed; "" when it was not gated), and
		// HeldOutMetric its metric on the held-out inputs.
		HeldOut       string   `json:"held_out"`
		HeldOutMetric *float64 `json:"held_out_metric"`
		// MetricQ1, MetricQ3 are the quartiles of the repeats MetricValue
		// is the median of, MetricLow and MetricHigh its 95% bootstrap
		// interval (all nil when it was one sample).
		MetricQ1   *float64 `json:"metric_q1"`
		MetricQ3   *float64 `json:"metric_q3"`
		MetricLow  *float64 `json:"metric_low"`
		MetricHigh *float64 `json:"metric_high"`
		// MetricBound is the metric's limit on the host that measured it
		// (its peak FLOP/s, its memory bandwidth), in its unit; nil: none.
		MetricBound *float64 `json:"metric_bound"`
	}
	PhaseRun struct {
		Run        string    `json:"run"`
		Node       string    `json:"node"`
		Attempt    int       `json:"attempt"`
		Worker     string    `json:"worker"`
		Phase      string    `json:"phase"`
		Status     string    `json:"status"`
		ExitCode   int       `json:"exit_code"`
		DurationMS float64   `json:"duration_ms"`
		Compiler   string    `json:"compiler"`
		ErrorKind  string    `json:"error_kind"`
		TS         time.Time `json:"ts"`
		// Nodes the phase ran on and the MPI ranks hpcq launched across
		// them (a multi-node task's run phase); 1 and 0 otherwise.
		Nodes int `json:"nodes"`
		Ranks int `json:"ranks"`
	}
	Metric struct {
		Run     string    `json:"run"`
		Node    string    `json:"node"`
		Attempt int       `json:"attempt"`
		Name    string    `json:"name"`
		Value   float64   `json:"value"`
		Unit    string    `json:"unit"`
		TS      time.Time `json:"ts"`
	}
	// Artifact is a file of a node attempt brought into the run directory.
	Artifact struct {
		Run     string `json:"run"`
		Node    string `json:"node"`
		Attempt int    `json:"attempt"`
		// Kind is log, output or plot.
		Kind string `json:"kind"`
		Name string `json:"name"`
		// Path is relative to the run directory: nodes/<id>/logs/<name>
		// or nodes/<id>/outputs/<name>.
		Path   string    `json:"path"`
		Bytes  int64     `json:"bytes"`
		SHA256 string    `json:"sha256"`
		TS     time.Time `json:"ts"`
	}
	// Sample is one measured repeat of one input of a node's evaluation
	// (the idea's harness): every sample the metric is made of.
	Sample struct {
		Run     string `json:"run"`
		Node    string `json:"node"`
		Attempt int    `json:"attempt"`
		// Stage is search or held_out (the quick pass measures nothing).
		Stage  string `json:"stage"`
		Input  string `json:"input"`
		Repeat int    `json:"repeat"`
		// Value is nil when the repeat has none (an incorrect one, a
		// warm-up the harness did not time).
		Value   *float64  `json:"value"`
		Unit    string    `json:"unit"`
		Correct bool      `json:"correct"`
		Worker  string    `json:"worker"`
		Host    string    `json:"host"`
		TS      time.Time `json:"ts"`
	}
	LLMCall struct {
		Run  string `json:"run"`
		Node string `json:"node"`
		// CallID is unique per request (random when empty).
		CallID    string `json:"call_id"`
		Purpose   string `json:"purpose"`
		Model     string `json:"model"`
		TokensIn  int64  `json:"tokens_in"`
		TokensOut int64  `json:"tokens_out"`
		// ReasoningTokens of TokensOut were spent thinking, CachedTokens
		// of TokensIn came from the endpoint's prompt cache;
		// TokensEstimated: the endpoint reported no usage (counted here).
		ReasoningTokens int64     `json:"reasoning_tokens"`
		CachedTokens    int64     `json:"cached_tokens"`
		TokensEstimated bool      `json:"tokens_estimated"`
		LatencyMS       float64   `json:"latency_ms"`
		CostUSD         float64   `json:"cost_usd"`
		CacheHit        bool      `json:"cache_hit"`
		Error           string    `json:"error"`
		TS              time.Time `json:"ts"`
		// FinishReason is how the reply ended (llm.Response.Finish);
		// Unpriced: no price resolved to the model, CostUSD is not known.
		FinishReason string `json:"finish_reason"`
		Unpriced     bool   `json:"unpriced"`
	}
)

// Rows are rows for any of the tables, written together.
type Rows struct {
	Runs      []Run      `json:"runs,omitempty"`
	Nodes     []Node     `json:"nodes,omitempty"`
	PhaseRuns []PhaseRun `json:"phase_runs,omitempty"`
	Metrics   []Metric   `json:"metrics,omitempty"`
	LLMCalls  []LLMCall  `json:"llm_calls,omitempty"`
	Artifacts []Artifact `json:"artifacts,omitempty"`
	Samples   []Sample   `json:"samples,omitempty"`
}

// Append returns r with the rows of o after its own.
func (r Rows) Append(o Rows) Rows {
	r.Runs = append(r.Runs, o.Runs...)
	r.Nodes = append(r.Nodes, o.Nodes...)
	r.PhaseRuns = append(r.PhaseRuns, o.PhaseRuns...)
	r.Metrics = append(r.Metrics, o.Metrics...)
	r.LLMCalls = append(r.LLMCalls, o.LLMCalls...)
	r.Artifacts = append(r.Artifacts, o.Artifacts...)
	r.Samples = append(r.Samples, o.Samples...)
	return r
}

// Len is the number of rows.
func (r Rows) Len() int {
	return len(r.Runs) + len(r.Nodes) + len(r.PhaseRuns) + len(r.Metrics) + len(r.LLMCalls) + len(r.Artifacts) + len(r.Samples)
}

// Sink stores rows. Write returns once they are durable where the sink
// keeps them (the ClickHouse sink: in its spool).
type Sink interface {
	Write(ctx context.Context, rows Rows) error
	Close() error
}

// Columns of each table, in order: the ClickHouse migration
// (internal/chdb/migrations/0002_results.sql) and the SQLite schema have
// exactly these (a test compares them with the real servers').
var Columns = map[string][]string{
	"runs": {"run", "status", "title", "mode", "config", "ts_ms", "ts"},
	"nodes": {"run", "node", "parent", "stage", "kind", "pool", "attempt", "status", "error_kind", "metric_name", "metric_value", "ts_ms", "ts",
		"metric_from", "self_reported", "held_out", "held_out_metric", "metric_q1", "metric_q3", "metric_low", "metric_high",
		"metric_bound"},
	"phase_runs": {"run", "node", "attempt", "worker", "phase", "status", "exit_code", "duration_ms", "compiler", "error_kind", "ts_ms", "ts",
		"nodes", "ranks"},
	"metrics": {"run", "node", "attempt", "name", "value", "unit", "ts_ms", "ts"},
	"llm_calls": {"run", "node", "call_id", "purpose", "model", "tokens_in", "tokens_out", "latency_ms", "cost_usd", "cache_hit", "error", "ts_ms", "ts",
		"reasoning_tokens", "cached_tokens", "tokens_estimated", "finish_reason", "unpriced"},
	"artifacts": {"run", "node", "attempt", "kind", "name", "path", "bytes", "sha256", "ts_ms", "ts"},
	"samples":   {"run", "node", "attempt", "stage", "input", "repeat", "value", "unit", "correct", "worker", "host", "ts_ms", "ts"},
}

// Tables lists the tables in a fixed order.
var Tables = []string{"runs", "nodes", "phase_runs", "metrics", "llm_calls", "artifacts", "samples"}

// values returns each table's rows as column values, in Columns order, with
// the Go types the ClickHouse columns take (SQLite takes them too).
func (r Rows) values() map[string][][]any {
	out := map[string][][]any{}
	for _, x := range r.Runs {
		out["runs"] = append(out["runs"], []any{x.Run, x.Status, x.Title, x.Mode, x.Config, x.TS.UnixMilli(), x.TS})
	}
	for _, x := range r.Nodes {
		out["nodes"] = append(out["nodes"], []any{x.Run, x.Node, x.Parent, uint32(x.Stage), x.Kind, x.Pool, uint32(x.Attempt), x.Status,
			x.ErrorKind, x.MetricName, x.MetricValue, x.TS.UnixMilli(), x.TS, x.MetricFrom, x.SelfReported, x.HeldOut, x.HeldOutMetric,
			x.MetricQ1, x.MetricQ3, x.MetricLow, x.MetricHigh, x.MetricBound})
	}
	for _, x := range r.PhaseRuns {
		out["phase_runs"] = append(out["phase_runs"], []any{x.Run, x.Node, uint32(x.Attempt), x.Worker, x.Phase, x.Status, int32(x.ExitCode),
			x.DurationMS, x.Compiler, x.ErrorKind, x.TS.UnixMilli(), x.TS, uint32(max(1, x.Nodes)), uint32(x.Ranks)})
	}
	for _, x := range r.Metrics {
		out["metrics"] = append(out["metrics"], []any{x.Run, x.Node, uint32(x.Attempt), x.Name, x.Value, x.Unit, x.TS.UnixMilli(), x.TS})
	}
	for _, x := range r.LLMCalls {
		hit := uint8(0)
		if x.CacheHit {
			hit = 1
		}
		estimated, unpriced := uint8(0), uint8(0)
		if x.TokensEstimated {
			estimated = 1
		}
		if x.Unpriced {
			unpriced = 1
		}
		out["llm_calls"] = append(out["llm_calls"], []any{x.Run, x.Node, x.CallID, x.Purpose, x.Model, uint64(x.TokensIn), uint64(x.TokensOut),
			x.LatencyMS, x.CostUSD, hit, x.Error, x.TS.UnixMilli(), x.TS, uint64(x.ReasoningTokens), uint64(x.CachedTokens), estimated,
			x.FinishReason, unpriced})
	}
	for _, x := range r.Samples {
		correct := uint8(0)
		if x.Correct {
			correct = 1
		}
		out["samples"] = append(out["samples"], []any{x.Run, x.Node, uint32(x.Attempt), x.Stage, x.Input, uint32(x.Repeat), x.Value, x.Unit, correct,
			x.Worker, x.Host, x.TS.UnixMilli(), x.TS})
	}
	for _, x := range r.Artifacts {
		out["artifacts"] = append(out["artifacts"], []any{x.Run, x.Node, uint32(x.Attempt), x.Kind, x.Name, x.Path, uint64(x.Bytes), x.SHA256,
			x.TS.UnixMilli(), x.TS})
	}
	return out
}

// Compiler is the program of a node's first compile command: its first
// word that is not a variable assignment or a wrapper, without its
// directory ("gcc", "mpicc", "nvcc", "make"); "" when the node compiles
// nothing.
func Compiler(t *schema.NodeTask) string {
	for _, c := range t.Artifacts.Compile.Commands {
		for _, w := range strings.Fields(c) {
			if strings.Contains(w, "=") || w == "env" || w == "time" || w == "nice" || w == "exec" {
				continue
			}
			return path.Base(w)
		}
	}
	return ""
}

// AttemptRows are the phase_runs, metrics and artifacts rows of a task's
// result: the facts of one attempt. Exactly one side writes them: the
// worker, where it reaches the results store (local mode, ClickHouse),
// else the scheduler. The node's row is the scheduler's (NodeRow).
func AttemptRows(t *schema.NodeTask, r *schema.NodeResult) Rows {
	var rows Rows
	compiler := Compiler(t)
	end := resultEnd(r)
	for _, p := range r.Phases {
		status, kind := schema.PhaseOK, ""
		if !p.OK {
			status = schema.PhaseFailed
			if r.Error != nil && r.Error.Phase == p.Name {
				kind = r.Error.Kind
			}
		}
		nodes, ranks := 1, 0
		if p.Name == schema.PhaseRun && r.Limits != nil && r.Limits.Nodes > 1 {
			nodes, ranks = r.Limits.Nodes, r.Limits.Ranks
		}
		rows.PhaseRuns = append(rows.PhaseRuns, PhaseRun{Run: r.RunID, Node: r.NodeID, Attempt: r.Attempt, Worker: r.Worker, Phase: p.Name,
			Status: status, ExitCode: p.ExitCode, DurationMS: float64(p.DurationMS), Compiler: compiler, ErrorKind: kind, TS: p.Started,
			Nodes: nodes, Ranks: ranks})
	}
	for _, n := range slices.Sorted(maps.Keys(r.Metrics)) {
		rows.Metrics = append(rows.Metrics, Metric{Run: r.RunID, Node: r.NodeID, Attempt: r.Attempt, Name: n, Value: r.Metrics[n],
			Unit: r.MetricUnits[n], TS: end})
	}
	if ev := r.Evaluation; ev != nil {
		for _, x := range ev.Samples {
			var v *float64
			if x.Metric != nil {
				m := *x.Metric
				v = &m
			}
			rows.Samples = append(rows.Samples, Sample{Run: r.RunID, Node: r.NodeID, Attempt: r.Attempt, Stage: ev.Stage, Input: x.Input, Repeat: x.Repeat,
				Value: v, Unit: x.Unit, Correct: x.Correct, Worker: r.Worker, Host: r.Host, TS: end})
		}
	}
	for _, a := range r.Artifacts {
		rows.Artifacts = append(rows.Artifacts, Artifact{Run: r.RunID, Node: r.NodeID, Attempt: r.Attempt, Kind: a.Kind, Name: a.Name,
			Path: rundir.NodeFile(r.NodeID, rundir.ArtifactDir(a), a.Name), Bytes: a.Bytes, SHA256: a.SHA256, TS: end})
	}
	return rows
}

// SetSpread sets the row's quartiles and interval from sp (nil: none).
func (n *Node) SetSpread(sp *schema.Spread) {
	if sp == nil {
		return
	}
	q1, q3, lo, hi := sp.Q1, sp.Q3, sp.Low, sp.High
	n.MetricQ1, n.MetricQ3, n.MetricLow, n.MetricHigh = &q1, &q3, &lo, &hi
}

// SetBound sets the row's metric_bound from b (nil, or an impossible
// metric's: none).
func (n *Node) SetBound(b *rundir.Bound) {
	if b == nil || b.Impossible {
		return
	}
	v := b.Limit
	n.MetricBound = &v
}

// EvaluatedMetric names the metric of a nodes row whose value an evaluator
// measured when the program reported no metric of its own to name it.
const EvaluatedMetric = "evaluated"

// NodeRow is the nodes row of a task that ended with result r (nil: none
// came), its status and error kind those of the node's outcome
// (rundir.Outcome.StatusOf). Its metric is the first the run phase names,
// else the first by name; its value only when the node is ok, and then,
// when an evaluator measured the node, the evaluator's (never the
// program's own: that stays in the metrics table).
func NodeRow(t *schema.NodeTask, r *schema.NodeResult, status, errKind string) Node {
	node := Node{Run: t.RunID, Node: t.NodeID, Parent: t.ParentID, Stage: t.Stage, Kind: t.Kind, Pool: t.Pool, Attempt: t.Attempt,
		Status: status, ErrorKind: errKind, TS: time.Now()}
	if r == nil {
		return node
	}
	node.Attempt, node.TS = r.Attempt, resultEnd(r)
	names := slices.Sorted(maps.Keys(r.Metrics))
	if ev := r.Evaluation; ev != nil {
		node.MetricName = EvaluatedMetric
		if len(names) > 0 {
			node.MetricName = names[0]
		}
		for _, p := range t.Artifacts.Run.MetricPatterns {
			if _, ok := r.Metrics[p.Name]; ok {
				node.MetricName = p.Name
				break
			}
		}
		node.MetricFrom = rundir.MetricFromEvaluator
		if v, ok := r.Metrics[node.MetricName]; ok {
			node.SelfReported = &v
		}
		if status == schema.NodeOK && ev.Metric != nil {
			v := *ev.Metric
			node.MetricValue = &v
			node.SetSpread(ev.Spread)
		}
		return node
	}
	if len(names) == 0 {
		return node
	}
	node.MetricName = names[0]
	for _, p := range t.Artifacts.Run.MetricPatterns {
		if _, ok := r.Metrics[p.Name]; ok {
			node.MetricName = p.Name
			break
		}
	}
	if status == schema.NodeOK {
		v := r.Metrics[node.MetricName]
		node.MetricValue = &v
	}
	return node
}

func resultEnd(r *schema.NodeResult) time.Time {
	return r.Started.Add(time.Duration(r.DurationMS) * time.Millisecond)
}

// withIDs gives every llm_calls row without a CallID a random one. Sinks
// call it before a row leaves the caller (spooled, or retried), so that a
// row written twice keeps its key and folds.
func (r Rows) withIDs() Rows {
	copied := false
	for i := range r.LLMCalls {
		if r.LLMCalls[i].CallID != "" {
			continue
		}
		if !copied {
			r.LLMCalls = append([]LLMCall(nil), r.LLMCalls...) // not the caller's array
			copied = true
		}
		r.LLMCalls[i].CallID = newID()
	}
	return r
}

// newID is a unique identifier that sorts in the order the IDs were made:
// the time in nanoseconds (16 hex digits), then 64 random bits. A node's
// calls are recorded one after the other, so ordering its rows by call_id
// after ts_ms keeps their order when two fall in one millisecond.
func newID() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixNano()))
	_, _ = rand.Read(b[8:])
	return hex.EncodeToString(b[:])
}
