package dispatch

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// Unanswered counts the outcomes with neither a result nor a dead letter.
func Unanswered(outs []Outcome) int {
	n := 0
	for _, o := range outs {
		if o.Result == nil && o.DeadLetter == nil {
			n++
		}
	}
	return n
}

// Record is the outcome as the task's result.json, a line of results.jsonl
// and a line of `scheduler exec --json` keep it (rundir.Outcome, sealed).
func (o *Outcome) Record() rundir.Outcome {
	r := rundir.Outcome{Node: o.Task.NodeID, Attempt: o.Task.Attempt, Result: o.Result, ArtifactsError: o.ArtifactsError}
	switch {
	case o.Result != nil && o.Result.Error != nil:
		e := o.Result.Error
		r.Buggy, r.Reason = true, fmt.Sprintf("%s in %s: %s", e.Kind, e.Phase, e.Message)
	case o.Result != nil:
	case o.DeadLetter != nil:
		r.Buggy, r.Reason, r.DeadLetter = true, "dead-lettered: "+o.DeadLetter.Reason, DeadLetterRecord(o.DeadLetter)
	case o.Canceled:
		r.Buggy, r.Canceled, r.Reason = true, true, "canceled: the exec ended before its answer"
	default:
		r.Buggy, r.Reason = true, "no answer"
	}
	r.Seal()
	return r
}

// DeadLetterRecord is what a node's result.json keeps of a dead letter.
func DeadLetterRecord(d *queue.DeadLetter) *rundir.DeadLetter {
	if d == nil {
		return nil
	}
	return &rundir.DeadLetter{Pool: d.Pool, Reason: d.Reason, Deliveries: d.Deliveries, Worker: d.Worker, Time: d.Time}
}

// WriteResultsFile writes the Record of every outcome to path, one per line.
func WriteResultsFile(path string, outs []Outcome) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, o := range outs {
		if err := enc.Encode(o.Record()); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// OutcomeRows are the rows that close an exec's run: the run's status and
// every task's nodes row, and (withResults: the workers could not write
// them) every result's attempt rows. A task without an answer that the
// exec's end canceled (Outcome.Canceled) makes the run canceled.
func OutcomeRows(run results.Run, outs []Outcome, withResults bool) results.Rows {
	rows := results.Rows{}
	run.Status, run.TS = schema.RunDone, time.Now()
	canceled := false
	for i := range outs {
		o := &outs[i]
		if o.Result != nil && withResults {
			rows = rows.Append(results.AttemptRows(o.Task, o.Result))
		}
		rec := o.Record()
		rows.Nodes = append(rows.Nodes, results.NodeRow(o.Task, o.Result, rec.Status, rec.ErrorKind))
		if !o.OK() {
			run.Status = schema.RunFailed
		}
		canceled = canceled || rec.Status == schema.NodeCanceled && o.Result == nil
	}
	if canceled {
		run.Status = schema.RunCanceled
	}
	rows.Runs = []results.Run{run}
	return rows
}
