package executor

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hpcq/hpcq/internal/textcut"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/schema"
)

// RecallSink stores the recall events of a node's memory branch
// (memory.RecallWriter is the one workers use).
type RecallSink interface {
	Append(ctx context.Context, run, branch string, redact bool, ev memory.RecallEvent) error
}

// recorder writes a task's recall events as its phases happen. Once a write
// fails (or with no sink), the events go into the result's RecallPending
// instead, for the scheduler to store: none is lost, none stored twice.
type recorder struct {
	ctx     context.Context
	sink    RecallSink
	t       *schema.NodeTask
	stored  int
	pending []schema.RecallEvent
	failed  error
}

func (e *Executor) recorder(ctx context.Context, t *schema.NodeTask) *recorder {
	if t.Recall == nil {
		return nil
	}
	// A drain must not lose the events of what already ran.
	return &recorder{ctx: context.WithoutCancel(ctx), sink: e.cfg.Recall, t: t}
}

// add records one event of the node.
func (r *recorder) add(kind, phase, payload string) {
	if r == nil {
		return
	}
	if len(payload) > schema.MaxRecallPayloadBytes {
		payload = payload[:schema.MaxRecallPayloadBytes-64] + "\n[... cut to " + fmt.Sprint(schema.MaxRecallPayloadBytes) + " bytes]"
	}
	if r.sink != nil && r.failed == nil {
		ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
		err := r.sink.Append(ctx, r.t.RunID, r.t.BranchID, r.t.Recall.RedactSecrets,
			memory.RecallEvent{Kind: kind, NodeID: r.t.NodeID, Phase: phase, Payload: payload})
		cancel()
		if err == nil {
			r.stored++
			return
		}
		r.failed = err
	}
	if len(r.pending) < schema.MaxRecallEvents {
		r.pending = append(r.pending, schema.RecallEvent{Kind: kind, Phase: phase, Payload: payload, TS: time.Now().UTC()})
	}
}

// finish puts the counts and the events not stored in res.
func (r *recorder) finish(res *schema.NodeResult) {
	if r == nil || res == nil {
		return
	}
	res.RecallStored, res.RecallPending = r.stored, r.pending
}

// phaseStarted is the payload of phase_started: its commands.
func phaseStarted(cmds []string) string {
	var b strings.Builder
	for _, c := range cmds {
		b.WriteString("$ " + c + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// phaseEnded records phase_complete, execution_result (the run phase,
// with its output's tail) or error_encountered: the seed's events, with
// the phase as the event's phase.
func (r *recorder) phaseEnded(pr schema.PhaseResult, rerr *schema.ResultError) {
	if r == nil {
		return
	}
	payload := fmt.Sprintf("exit %d in %d ms", pr.ExitCode, pr.DurationMS)
	if !pr.OK || rerr != nil {
		if rerr != nil {
			payload += ": " + rerr.Kind + ": " + rerr.Message
		}
		payload += "\n" + textcut.Tail(pr.LogTail, 1500)
		r.add(memory.EventErrorEncountered, pr.Name, payload)
		return
	}
	if pr.Name == schema.PhaseRun {
		// The run's completion carries what it printed.
		r.add(memory.EventExecutionResult, pr.Name, payload+"\n"+textcut.Tail(pr.LogTail, 1500))
		return
	}
	r.add(memory.EventPhaseComplete, pr.Name, payload)
}

// filesWritten is the payload of the coding phase's phase_complete: the
// files and sizes.
func filesWritten(files []schema.File) string {
	parts := make([]string, 0, len(files))
	for _, f := range files {
		parts = append(parts, fmt.Sprintf("%s (%d bytes)", f.Path, len(f.Content)))
	}
	return fmt.Sprintf("wrote %d files: %s", len(files), strings.Join(parts, ", "))
}

// metricsText is the payload of metric_extracted.
func metricsText(m map[string]float64, units map[string]string) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, k := range names {
		parts = append(parts, strings.TrimSpace(fmt.Sprintf("%s = %g %s", k, m[k], units[k])))
	}
	return strings.Join(parts, "; ")
}
