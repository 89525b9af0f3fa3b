package gate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hpcq/hpcq/internal/dispatch"
	"github.com/hpcq/hpcq/internal/hostbound"
	"github.com/hpcq/hpcq/internal/search"
	"github.com/hpcq/hpcq/internal/session"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// Params are the gate's queue and who writes the held-out tasks' rows.
type Params struct {
	Queue *queue.Queue
	// WorkersWriteResults: the workers write their tasks' phase_runs and
	// metrics rows; otherwise Run writes them.
	WorkersWriteResults bool
}

// Run evaluates the search's best nodes and its baseline on the held-out
// inputs of the idea's harness, each as a task <node>-held-out on a worker
// of the pool (the node's own task again, its evaluator the held-out one),
// and writes the verdict: gate.json, gate/<node>.json, and each gated
// node's row in the results tables with its held_out and held_out_metric.
// ok is false when the run has no held-out inputs. A resumed run's tasks
// already answered are not run again (the results stream answers them).
func Run(ctx context.Context, s *session.Session, p Params) (g rundir.Gate, ok bool, err error) {
	h := s.Spec.Evaluation.Harness
	if h == nil || len(h.HeldOut) == 0 {
		return g, false, nil
	}
	if p.Queue == nil {
		return g, true, errors.New("gate: Params need Queue")
	}
	t, err := search.ReadTree(filepath.Join(s.Dir, rundir.TreeJournal))
	if err != nil {
		return g, true, fmt.Errorf("gate: %w", err)
	}
	maximize := s.Spec.Metric.Direction == "maximize"
	cands, baseline := Pick(t.Nodes(), maximize, h.Gate.Top)
	ev, err := h.HeldOutTask()
	if err != nil {
		return g, true, fmt.Errorf("gate: %w", err)
	}
	searchBest, _ := t.Best(maximize)
	s.Log.Info("held-out gate", "nodes", len(cands), "baseline", baseline, "inputs", len(h.HeldOut))
	outs, err := evaluate(ctx, s, p, cands, ev)
	if err != nil {
		return g, true, err
	}
	answers := map[string]Answer{}
	for id, o := range outs {
		answers[id] = AnswerOf(o)
	}
	g = Decide(cands, baseline, answers, maximize, h.Gate.OverfitShare)
	g.Inputs, g.Top, g.SearchBest = len(h.HeldOut), h.Gate.Top, searchBest.ID
	if err := writeRows(ctx, s, p, g, outs); err != nil {
		s.Log.Warn("held-out rows not written", "err", err)
	}
	if err := rundir.WriteJSON(rundir.Dir(s.Dir).Path(rundir.GateFile), g); err != nil {
		return g, true, err
	}
	s.Log.Info("held-out gate ended", "best", g.Best, "search_best", g.SearchBest)
	return g, true, nil
}

// evaluate runs the candidates' held-out tasks one after another (no
// gated node's timing shares the machine with another's) and returns their
// outcomes by node (also in gate/<node>.json). A task that cannot be made
// (the node's task.json is gone) is a failed outcome of its own.
func evaluate(ctx context.Context, s *session.Session, p Params, cands []Candidate, ev *schema.Evaluate) (map[string]rundir.Outcome, error) {
	d, err := dispatch.NewDispatcher(ctx, p.Queue, s.RunID)
	if err != nil {
		return nil, fmt.Errorf("gate: %w", err)
	}
	defer d.Close()
	dir := rundir.Dir(s.Dir)
	if err := os.MkdirAll(dir.Path(rundir.GateDir), 0o755); err != nil {
		return nil, err
	}
	outs := map[string]rundir.Outcome{}
	for _, c := range cands {
		o, err := heldOut(ctx, d, dir, c.Node, ev, s.Spec.Metric.Name, s.Spec.Metric.Limit())
		if err != nil {
			return nil, err
		}
		o.Seal()
		if err := rundir.WriteJSON(filepath.Join(dir.Path(rundir.GateDir), c.Node+".json"), o); err != nil {
			s.Log.Warn("held-out outcome not saved", "node_id", c.Node, "err", err)
		}
		if a := AnswerOf(o); a.Metric != nil {
			s.Log.Info("held-out node evaluated", "node_id", c.Node, "metric", *a.Metric)
		} else {
			s.Log.Info("held-out node evaluated", "node_id", c.Node, "incorrect", a.Incorrect, "reason", a.Reason)
		}
		outs[c.Node] = o
	}
	return outs, nil
}

// heldOut publishes node's held-out task and waits for its answer; an
// error means ctx ended.
func heldOut(ctx context.Context, d *dispatch.Dispatcher, dir rundir.Dir, node string, ev *schema.Evaluate, metric string,
	bound hostbound.Metric) (rundir.Outcome, error) {
	id := node + rundir.HeldOutSuffix
	var t schema.NodeTask
	switch ok, err := rundir.ReadJSON(dir.Path(rundir.NodeFile(node, rundir.TaskFile)), &t); {
	case err != nil:
		return rundir.Outcome{Node: id, Buggy: true, NotRun: true, Reason: "its task: " + err.Error()}, nil
	case !ok:
		return rundir.Outcome{Node: id, Buggy: true, NotRun: true, Reason: "its task.json is gone"}, nil
	}
	// The node's code and phases again, on the held-out inputs: no memory
	// branch (nothing of it reaches a prompt), no parent.
	t.NodeID, t.Attempt, t.ParentID, t.BranchID, t.Recall, t.Evaluate = id, 1, "", "", nil, ev
	ch, err := d.Submit(ctx, &t)
	if err != nil {
		if ctx.Err() != nil {
			return rundir.Outcome{}, ctx.Err()
		}
		return rundir.Outcome{Node: id, Buggy: true, NotRun: true, Reason: "publish: " + err.Error()}, nil
	}
	select {
	case got := <-ch:
		o := rundir.Outcome{Node: id, Attempt: 1, Result: got.Result, DeadLetter: dispatch.DeadLetterRecord(got.DeadLetter)}
		if a := AnswerOf(o); a.Metric == nil {
			o.Buggy, o.Reason = true, a.Reason
		} else {
			o.Metric, o.MetricFrom = a.Metric, rundir.MetricFromEvaluator
			hostbound.Judge(&o, got.Result, metric, bound)
		}
		return o, nil
	case <-ctx.Done():
		return rundir.Outcome{}, fmt.Errorf("gate: %w", ctx.Err())
	}
}

// writeRows writes each gated node's row again, with its verdict, and the
// held-out tasks' phase_runs and metrics rows (unless the workers do).
func writeRows(ctx context.Context, s *session.Session, p Params, g rundir.Gate, outs map[string]rundir.Outcome) error {
	var rows results.Rows
	dir := rundir.Dir(s.Dir)
	for _, n := range g.Nodes {
		o, ok, err := dir.ReadOutcome(n.Node)
		if err != nil || !ok {
			return fmt.Errorf("node %s: its result.json: %v", n.Node, err)
		}
		var t schema.NodeTask
		if _, err := rundir.ReadJSON(dir.Path(rundir.NodeFile(n.Node, rundir.TaskFile)), &t); err != nil {
			return err
		}
		row := results.Node{Run: s.RunID, Node: n.Node, Parent: t.ParentID, Stage: max(t.Stage, 1), Kind: t.Kind, Pool: s.Spec.Pool, Attempt: 1,
			Status: o.Status, ErrorKind: o.ErrorKind, MetricName: s.Spec.Metric.Name, MetricValue: o.Metric, TS: time.Now(),
			MetricFrom: o.MetricFrom, SelfReported: o.SelfReported, HeldOut: n.Verdict, HeldOutMetric: n.HeldOutMetric}
		if o.Metric != nil && !o.Buggy {
			row.SetSpread(o.Spread)
			row.SetBound(o.Bound)
		}
		rows.Nodes = append(rows.Nodes, row)
		if ho := outs[n.Node]; ho.Result != nil && !p.WorkersWriteResults {
			t.NodeID = n.Node + rundir.HeldOutSuffix
			rows = rows.Append(results.AttemptRows(&t, ho.Result))
		}
	}
	return s.Rows.Write(ctx, rows)
}
