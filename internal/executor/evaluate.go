// The evaluate phase: the idea's evaluator run on the node's built files,
// where the node's own program cannot reach it.

package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hpcq/hpcq/internal/evaluate"
	"github.com/hpcq/hpcq/internal/fileio"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/schema"
)

// reportName is the report's file in the evaluator's workspace
// (HPCQ_EVAL_REPORT).
const reportName = "hpcq-eval-report.jsonl"

// maxKeptSamples bounds the samples a result carries (the verdict is made
// of all of them): a result stays within schema.MaxResultBytes.
const maxKeptSamples = 2000

// EvaluateDir is where a task attempt's evaluator runs: a workspace of its
// own beside the node's, made only once the node's phases are over.
func (e *Executor) EvaluateDir(t *schema.NodeTask) string {
	return filepath.Join(e.cfg.RunsDir, t.RunID, "evaluate", t.NodeID, strconv.Itoa(t.Attempt))
}

// evaluate runs t.Evaluate once the task's own phases succeeded and their
// sandbox is gone (every process of the node ended with it): the harness's
// files written into a workspace of their own, its commands run there in a
// fresh sandbox of the task's limits with the node's workspace read-only
// (HPCQ_NODE). Its report becomes res.Evaluation; a node it finds wrong
// gets res.Error incorrect, one it could not evaluate evaluate_failed,
// each with the harness's words. Its error is the worker's.
func (e *Executor) evaluate(ctx context.Context, t *schema.NodeTask, slot worker.Slot, res *schema.NodeResult) error {
	ev, start := t.Evaluate, time.Now()
	failIn := func(phase, msg string) error {
		res.Evaluation = &schema.Evaluation{Stage: ev.Stage, Reason: msg, DurationMS: time.Since(start).Milliseconds()}
		res.Error = &schema.ResultError{Phase: phase, Kind: schema.ErrKindEvaluateFailed, Message: msg}
		phaseFailed(res, phase)
		return nil
	}
	fail := func(msg string) error { return failIn(schema.PhaseEvaluate, msg) }
	if t.Container != nil {
		return fail("the evaluator does not run in a container image yet: run the task on the host, or without evaluate")
	}
	ws, dir := e.WorkspaceDir(t), e.EvaluateDir(t)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	if err := freshDir(dir); err != nil {
		return fmt.Errorf("create the evaluator's workspace: %w", err)
	}
	if err := WriteFiles(dir, ev.Files, e.cfg.Workspace); err != nil {
		if errors.Is(err, schema.ErrInvalidWorkspace) {
			return fail("the harness's files: " + err.Error())
		}
		return err
	}
	var user *TaskUser
	if e.sandbox != nil {
		user, _ = e.sandbox.ForSlot(slot.Index)
		if err := e.sandbox.ChownWorkspace(dir, user); err != nil {
			return fmt.Errorf("the evaluator's workspace for the sandbox user: %w", err)
		}
	}
	p := evalPass{t: t, slot: slot, ws: ws, dir: dir, user: user}
	if len(ev.Quick) > 0 {
		samples, msg, err := e.evalPass(ctx, p, schema.PhaseEvaluateQuick, schema.EvalQuick, ev.Quick, 1, res)
		switch {
		case err != nil:
			return err
		case msg != "":
			return failIn(schema.PhaseEvaluateQuick, msg)
		}
		if v := evaluate.Check(samples, ev.Quick); !v.Correct {
			verdict(res, schema.PhaseEvaluateQuick, schema.EvalQuick, samples, v, start)
			return nil
		}
	}
	samples, msg, err := e.evalPass(ctx, p, schema.PhaseEvaluate, ev.Stage, ev.Inputs, ev.Repeats, res)
	switch {
	case err != nil:
		return err
	case msg != "":
		return fail(msg)
	}
	verdict(res, schema.PhaseEvaluate, ev.Stage, samples, evaluate.Judge(samples, ev.Inputs), start)
	return nil
}

// evalPass is where a pass of the evaluator runs: the task, its slot, the
// node's workspace and the harness's, the slot's user.
type evalPass struct {
	t       *schema.NodeTask
	slot    worker.Slot
	ws, dir string
	user    *TaskUser
}

// evalPass runs the harness's commands once (phase: the quick pass or the
// full one) in a fresh sandbox of the task's limits, with the node's
// workspace read-only, and reads its report. msg says why the pass gave
// no report to judge; the error is the worker's.
func (e *Executor) evalPass(ctx context.Context, p evalPass, phase, stage string, inputs []string, repeats int,
	res *schema.NodeResult) (samples []schema.EvalSample, msg string, err error) {
	ev := p.t.Evaluate
	if err := os.Remove(filepath.Join(p.dir, reportName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, "", err
	}
	run := e.newPhaseRun(p.t, p.slot, p.dir, p.user)
	e.enforce(p.t, p.slot, &run)
	defer run.release(nil)
	run.visible = []string{p.ws}
	run.env = append(run.env, "HPCQ_NODE="+p.ws, "HPCQ_INPUTS="+strings.Join(inputs, "\n"), "HPCQ_STAGE="+stage,
		"HPCQ_REPEATS="+strconv.Itoa(repeats), "HPCQ_EVAL_REPORT="+filepath.Join(p.dir, reportName))
	log, err := os.OpenFile(filepath.Join(e.LogDir(p.t), phase+".log"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, "", fmt.Errorf("open the %s log: %w", phase, err)
	}
	defer log.Close()
	timeout := seconds(ev.TimeoutS, seconds(p.t.Limits.RunTimeoutS, e.cfg.RunTimeout))
	pr, rerr, err := e.runPhase(ctx, phaseSpec{phase, ev.Commands, timeout, schema.ErrKindEvaluateFailed}, run, log, nil, nil)
	if err != nil {
		return nil, "", err
	}
	res.Phases = append(res.Phases, pr)
	if rerr != nil {
		return nil, "the harness failed: " + rerr.Message, nil
	}
	samples, err = readReport(p.dir)
	if err != nil {
		return nil, err.Error(), nil
	}
	return samples, "", nil
}

// verdict records an evaluation's samples and verdict in res: the metric
// of a correct node, else its error in phase (incorrect, or
// evaluate_failed when the harness did not report what it was asked).
func verdict(res *schema.NodeResult, phase, stage string, samples []schema.EvalSample, v evaluate.Verdict, start time.Time) {
	res.Evaluation = &schema.Evaluation{Stage: stage, Samples: samples[:min(len(samples), maxKeptSamples)], Correct: v.Correct,
		Reason: v.Reason, Unit: v.Unit, DurationMS: time.Since(start).Milliseconds()}
	switch {
	case v.Correct:
		m := v.Metric
		res.Evaluation.Metric, res.Evaluation.Spread = &m, v.Spread
	case v.Incomplete:
		res.Error = &schema.ResultError{Phase: phase, Kind: schema.ErrKindEvaluateFailed, Message: v.Reason}
		phaseFailed(res, phase)
	default:
		res.Error = &schema.ResultError{Phase: phase, Kind: schema.ErrKindIncorrect, Message: v.Reason}
		phaseFailed(res, phase)
	}
}

// phaseFailed marks the last run of phase in res failed: a harness that
// exited 0 and found the node wrong (or reported too little) failed the
// phase, as its phase_runs row says (error_kind incorrect).
func phaseFailed(res *schema.NodeResult, phase string) {
	for i := len(res.Phases) - 1; i >= 0; i-- {
		if res.Phases[i].Name == phase {
			res.Phases[i].OK = false
			return
		}
	}
}

// readReport reads the harness's report: a regular file of the
// evaluator's workspace (not a link it left), within its bound.
func readReport(dir string) ([]schema.EvalSample, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, _, err := fileio.OpenRegular(root, reportName)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errors.New("the harness exited 0 and wrote no report (HPCQ_EVAL_REPORT)")
	}
	if err != nil {
		return nil, fmt.Errorf("the harness's report: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, evaluate.MaxReportBytes+1))
	if err != nil {
		return nil, fmt.Errorf("the harness's report: %w", err)
	}
	return evaluate.ParseReport(data)
}
