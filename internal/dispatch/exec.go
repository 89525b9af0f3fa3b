package dispatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hpcq/hpcq/internal/artifacts"
	"github.com/hpcq/hpcq/internal/fileio"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// NewRunID returns a run id that sorts by time: 20261121-234501-3fa9c2.
func NewRunID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// ErrDuplicateTask is returned when two tasks of one exec share a
// (node_id, attempt).
var ErrDuplicateTask = errors.New("duplicate task")

// ExecParams are the inputs of Exec.
type ExecParams struct {
	// Tasks to run. Their run_id is set to RunID.
	Tasks []*schema.NodeTask
	// RunID of the exec. Defaults to NewRunID().
	RunID string
	// ProgressEvery is how often progress is logged. Defaults to 10s.
	ProgressEvery time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// RunDir, when set, receives every result's artifacts as it arrives
	// (artifacts.Fetch: nodes/<id>/logs, nodes/<id>/outputs).
	RunDir string
}

// Outcome is the fate of one task of an exec.
type Outcome struct {
	Task *schema.NodeTask
	// Result is set when a worker reported the task.
	Result *schema.NodeResult
	// DeadLetter is set when the task was dead-lettered instead.
	DeadLetter *queue.DeadLetter
	// ArtifactsError says which of the result's files could not be
	// fetched into the run directory, and why.
	ArtifactsError string
	// Canceled: the exec ended before the task's answer and canceled it.
	Canceled bool
}

// OK reports whether the task ran and every phase succeeded.
func (o *Outcome) OK() bool { return o.Result != nil && o.Result.OK() }

// Exec publishes tasks and waits until every one has a result or a dead
// letter, or ctx ends. The outcomes are in the order of the tasks; when ctx
// ends first, those without an answer have neither Result nor DeadLetter and
// the error is ctx's.
//
// Long: the wait loop's cases share the outcomes and their index; split,
// they would need all of it.
func Exec(ctx context.Context, q *queue.Queue, p ExecParams) ([]Outcome, error) {
	if p.RunID == "" {
		p.RunID = NewRunID()
	}
	if p.ProgressEvery <= 0 {
		p.ProgressEvery = 10 * time.Second
	}
	log := p.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("run_id", p.RunID)
	out := make([]Outcome, len(p.Tasks))
	index := make(map[queue.ResultKey]int, len(p.Tasks))
	for i, t := range p.Tasks {
		c := *t
		c.RunID = p.RunID
		k := queue.ResultKey{NodeID: c.NodeID, Attempt: c.Attempt}
		if j, dup := index[k]; dup {
			return nil, fmt.Errorf("%w: tasks %d and %d are both node %q attempt %d", ErrDuplicateTask, j+1, i+1, c.NodeID, c.Attempt)
		}
		index[k] = i
		out[i].Task = &c
	}
	w, err := q.WatchRun(ctx, p.RunID, time.Now())
	if err != nil {
		return nil, err
	}
	defer w.Close()
	tasks := make([]*schema.NodeTask, len(out))
	for i := range out {
		tasks[i] = out[i].Task
	}
	if p.RunDir != "" {
		// nodes/<id>/task.json, as a tree search keeps them: scheduler ls
		// and logs read them while the exec goes.
		for _, t := range tasks {
			if err := writeNodeFile(p.RunDir, t.NodeID, rundir.TaskFile, t); err != nil {
				return nil, err
			}
		}
	}
	if _, err := q.PublishTasks(ctx, tasks); err != nil {
		return nil, err
	}
	log.Info("tasks published", "tasks", len(tasks))

	left := len(out)
	tick := time.NewTicker(p.ProgressEvery)
	defer tick.Stop()
	for left > 0 {
		select {
		case r := <-w.Results:
			i, ok := index[queue.ResultKey{NodeID: r.NodeID, Attempt: r.Attempt}]
			if !ok || out[i].Result != nil || out[i].DeadLetter != nil {
				continue
			}
			out[i].Result = r
			left--
			log.Debug("result", "node_id", r.NodeID, "ok", r.OK(), "worker", r.Worker)
			if p.RunDir != "" {
				if err := FetchArtifacts(ctx, q, p.RunDir, r); err != nil {
					out[i].ArtifactsError = err.Error()
					log.Error("artifacts not fetched", "node_id", r.NodeID, "err", err)
				}
				if err := writeNodeFile(p.RunDir, r.NodeID, rundir.ResultFile, out[i].Record()); err != nil {
					log.Warn("result.json not written", "node_id", r.NodeID, "err", err)
				}
			}
		case d := <-w.DeadLetters:
			i, ok := index[queue.ResultKey{NodeID: d.NodeID, Attempt: d.Attempt}]
			if !ok || out[i].Result != nil || out[i].DeadLetter != nil {
				continue
			}
			out[i].DeadLetter = &d
			left--
			log.Warn("task dead-lettered", "node_id", d.NodeID, "reason", d.Reason)
			if p.RunDir != "" {
				if err := writeNodeFile(p.RunDir, d.NodeID, rundir.ResultFile, out[i].Record()); err != nil {
					log.Warn("result.json not written", "node_id", d.NodeID, "err", err)
				}
			}
		case <-tick.C:
			logProgress(ctx, q, log, len(out)-left, len(out))
		case <-ctx.Done():
			return out, ctx.Err()
		}
	}
	return out, nil
}

// writeNodeFile writes v as nodes/<node>/<name> of runDir, atomically.
func writeNodeFile(runDir, node, name string, v any) error {
	p := rundir.Dir(runDir).Path(rundir.NodeFile(node, name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return fileio.WriteFileAtomic(p, append(data, '\n'))
}

// FetchArtifacts brings a result's artifacts into runDir (artifacts.Fetch).
func FetchArtifacts(ctx context.Context, q *queue.Queue, runDir string, r *schema.NodeResult) error {
	if len(r.Artifacts) == 0 {
		return nil
	}
	store, err := q.Artifacts(ctx)
	if err != nil {
		return fmt.Errorf("artifacts of node %s: %w", r.NodeID, err)
	}
	return artifacts.Fetch(ctx, store, runDir, r)
}

func logProgress(ctx context.Context, q *queue.Queue, log *slog.Logger, done, total int) {
	stats, err := q.Stats(ctx)
	if err != nil {
		log.Info("waiting for results", "done", done, "total", total, "stats_err", err)
		return
	}
	for _, s := range stats {
		if s.Pending+s.InFlight == 0 {
			continue
		}
		if s.Workers == 0 {
			log.Warn("waiting for results: no live worker serves this pool", "pool", s.Pool, "pending", s.Pending, "done", done, "total", total)
			continue
		}
		log.Info("waiting for results", "pool", s.Pool, "pending", s.Pending, "in_flight", s.InFlight, "workers", s.Workers, "done", done, "total", total)
	}
}
