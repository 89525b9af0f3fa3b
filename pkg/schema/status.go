package schema

// The status words of runs, nodes and phase runs: one vocabulary for the
// results tables (their status columns), a node's result.json, `scheduler
// ls` and the dashboard's API, documented in docs/results.md.

// Status of a runs row.
const (
	RunRunning     = "running"     // the run is going (or its process died: see its run directory)
	RunDone        = "done"        // every stage ran to its end and some node produced the metric
	RunFailed      = "failed"      // it ended and no node produced the metric (exec: some task failed)
	RunStopped     = "stopped"     // the search stopped early (the budget was spent)
	RunInterrupted = "interrupted" // a signal or a server outage ended it: resumable
	RunCanceled    = "canceled"    // scheduler cancel (or Ctrl-C on exec) stopped it: not resumable
)

// Status of a nodes row.
const (
	NodeQueued       = "queued"        // published, not answered yet
	NodeOK           = "ok"            // ran; in a tree search, produced the metric
	NodeFailed       = "failed"        // ran and failed (error_kind: the task's, or "metric" when the metric is missing)
	NodeNotRun       = "not_run"       // never ran: the model gave nothing usable or the budget was spent (error_kind "llm")
	NodeCached       = "cached"        // not run again: the result of an identical node was reused
	NodeDeadLettered = "dead_lettered" // its task was dead-lettered (error_kind "dead_letter")
	NodeNoAnswer     = "no_answer"     // the run ended without an answer for it
	NodeCanceled     = "canceled"      // canceled before or while it ran (error_kind "canceled")
)

// Status of a node not finished, as a run directory's readers tell it
// (`scheduler ls` and `status`, the dashboard), besides NodeQueued.
const (
	NodePreparing = "preparing" // its plan and code are being asked of the model
	NodeRunning   = "running"   // a worker reported it running
	// NodeDeclined: queued, and a worker handed it back without running it
	// (its limits do not fit the worker's walltime left or resources); it
	// waits for a worker that can.
	NodeDeclined = "declined"
)

// Unfinished says whether a node of status has not ended: preparing,
// queued, declined or running.
func Unfinished(status string) bool {
	switch status {
	case NodePreparing, NodeQueued, NodeDeclined, NodeRunning:
		return true
	}
	return false
}

// Waiting says whether a node of status waits for a worker: published and
// not taken (queued), or handed back (declined).
func Waiting(status string) bool { return status == NodeQueued || status == NodeDeclined }

// Status of a phase_runs row.
const (
	PhaseOK     = "ok"
	PhaseFailed = "failed"
)

// Error kinds the scheduler adds to a task's own (the ErrKind* of a
// NodeResult).
const (
	ErrKindLLM    = "llm"    // the model gave nothing usable
	ErrKindMetric = "metric" // the run reported no value for the run's metric
	// ErrKindImpossible: the node's metric is beyond what its host can do
	// (its peak FLOP/s, its memory bandwidth): not the work it claims.
	ErrKindImpossible = "impossible"
	ErrKindDeadLetter = "dead_letter" // the task was dead-lettered
)
