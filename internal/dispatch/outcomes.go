package dispatch

import (
	"encoding/json"
	"os"
	"time"

	"github.com/hpcq/hpcq/pkg/results"
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

// OutcomeLine is one line of results.jsonl (and of `scheduler exec --json`).
type OutcomeLine struct {
	NodeID     string             `json:"node_id"`
	Attempt    int                `json:"attempt"`
	Status     string             `json:"status"`
	Result     *schema.NodeResult `json:"result,omitempty"`
	DeadLetter *deadLetterJSON    `json:"dead_letter,omitempty"`
	// ArtifactsError: files of the result that could not be fetched.
	ArtifactsError string `json:"artifacts_error,omitempty"`
}

type deadLetterJSON struct {
	Pool       string    `json:"pool"`
	Reason     string    `json:"reason"`
	Deliveries uint64    `json:"deliveries"`
	Worker     string    `json:"worker,omitempty"`
	Time       time.Time `json:"time"`
}

// OutcomeJSON is an outcome as a line of results.jsonl.
func OutcomeJSON(o Outcome) OutcomeLine {
	l := OutcomeLine{NodeID: o.Task.NodeID, Attempt: o.Task.Attempt, Status: schema.NodeNoAnswer, Result: o.Result, ArtifactsError: o.ArtifactsError}
	switch {
	case o.Result != nil && o.Result.OK():
		l.Status = schema.NodeOK
	case o.Result != nil && o.Result.Error.Kind == schema.ErrKindCanceled:
		l.Status = schema.NodeCanceled
	case o.Result != nil:
		l.Status = schema.NodeFailed
	case o.DeadLetter != nil:
		l.Status = schema.NodeDeadLettered
		d := o.DeadLetter
		l.DeadLetter = &deadLetterJSON{Pool: d.Pool, Reason: d.Reason, Deliveries: d.Deliveries, Worker: d.Worker, Time: d.Time}
	}
	return l
}

// WriteResultsFile writes one OutcomeLine per outcome to path.
func WriteResultsFile(path string, outs []Outcome) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, o := range outs {
		if err := enc.Encode(OutcomeJSON(o)); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// OutcomeRows are the rows that close an exec's run: the run's status, the
// nodes that got no result, and (withResults) every result's rows. With
// canceled, the run and the tasks without an answer are canceled.
func OutcomeRows(run results.Run, outs []Outcome, withResults, canceled bool) results.Rows {
	now := time.Now()
	rows := results.Rows{}
	run.Status, run.TS = schema.RunDone, now
	for _, o := range outs {
		t := o.Task
		switch {
		case o.Result != nil && withResults:
			rows = rows.Append(results.FromResult(t, o.Result))
			rows.Runs = nil
		case o.Result == nil:
			status, kind := schema.NodeNoAnswer, ""
			switch {
			case o.DeadLetter != nil:
				status, kind = schema.NodeDeadLettered, schema.ErrKindDeadLetter
			case canceled:
				status, kind = schema.NodeCanceled, schema.ErrKindCanceled
			}
			rows.Nodes = append(rows.Nodes, results.Node{Run: run.Run, Node: t.NodeID, Parent: t.ParentID, Stage: t.Stage, Kind: t.Kind,
				Pool: t.Pool, Attempt: t.Attempt, Status: status, ErrorKind: kind, TS: now})
		}
		if !o.OK() {
			run.Status = schema.RunFailed
		}
	}
	if canceled {
		run.Status = schema.RunCanceled
	}
	rows.Runs = []results.Run{run}
	return rows
}
