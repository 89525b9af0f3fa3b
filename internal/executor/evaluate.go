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
	fail := func(msg string) error {
		res.Evaluation = &schema.Evaluation{Stage: ev.Stage, Reason: msg, DurationMS: time.Since(start).Milliseconds()}
		res.Error = &schema.ResultError{Phase: schema.PhaseEvaluate, Kind: schema.ErrKindEvaluateFailed, Message: msg}
		return nil
	}
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
	run := e.newPhaseRun(t, slot, dir, user)
	e.enforce(t, slot, &run)
	defer run.release(nil)
	run.visible = []string{ws}
	run.env = append(run.env, "HPCQ_NODE="+ws, "HPCQ_INPUTS="+strings.Join(ev.Inputs, "\n"), "HPCQ_STAGE="+ev.Stage,
		"HPCQ_REPEATS="+strconv.Itoa(ev.Repeats), "HPCQ_EVAL_REPORT="+filepath.Join(dir, reportName))
	log, err := os.OpenFile(filepath.Join(e.LogDir(t), schema.PhaseEvaluate+".log"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("open the evaluate log: %w", err)
	}
	defer log.Close()
	ph := phaseSpec{schema.PhaseEvaluate, ev.Commands, seconds(ev.TimeoutS, seconds(t.Limits.RunTimeoutS, e.cfg.RunTimeout)), schema.ErrKindEvaluateFailed}
	pr, rerr, err := e.runPhase(ctx, ph, run, log, nil, nil)
	if err != nil {
		return err
	}
	res.Phases = append(res.Phases, pr)
	if rerr != nil {
		return fail("the harness failed: " + rerr.Message)
	}
	samples, err := readReport(dir)
	if err != nil {
		return fail(err.Error())
	}
	v := evaluate.Judge(samples, ev.Inputs)
	res.Evaluation = &schema.Evaluation{Stage: ev.Stage, Samples: samples[:min(len(samples), maxKeptSamples)], Correct: v.Correct,
		Reason: v.Reason, Unit: v.Unit, DurationMS: time.Since(start).Milliseconds()}
	switch {
	case v.Correct:
		m := v.Metric
		res.Evaluation.Metric = &m
	case v.Incomplete:
		res.Error = &schema.ResultError{Phase: schema.PhaseEvaluate, Kind: schema.ErrKindEvaluateFailed, Message: v.Reason}
	default:
		res.Error = &schema.ResultError{Phase: schema.PhaseEvaluate, Kind: schema.ErrKindIncorrect, Message: v.Reason}
	}
	return nil
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
