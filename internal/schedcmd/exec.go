package schedcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hpcq/hpcq/internal/cli"
	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/dispatch"
	"github.com/hpcq/hpcq/internal/executor"
	"github.com/hpcq/hpcq/internal/local"
	"github.com/hpcq/hpcq/internal/stores"
	"github.com/hpcq/hpcq/internal/term"
	"github.com/hpcq/hpcq/internal/version"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// ExecOptions are what `scheduler exec` is asked.
type ExecOptions struct {
	// Local starts an embedded server and in-process workers (the default
	// without a NATS URL).
	Local bool
	// Pools of the in-process workers; default: the pools of the tasks.
	Pools []string
	// Files are the task files.
	Files []string
	// JSON prints JSON lines instead of a table.
	JSON bool
	Log  *slog.Logger
}

// Exec runs hand-written tasks (`scheduler exec`): publishes them, waits for
// each one's result or dead letter (until ctx ends), writes the results
// tables and results.jsonl, and prints a table. Failed tasks make it
// return ExitError(1).
func Exec(ctx context.Context, cfg *config.Scheduler, o ExecOptions) error {
	log := o.Log
	runID := dispatch.NewRunID()
	tasks, err := dispatch.LoadTasks(o.Files, runID)
	if err != nil {
		return fmt.Errorf("%w: %w", cli.ErrInvalidInput, err)
	}
	local := o.Local
	if cfg.NATS.URL == "" && !local {
		log.Info("no NATS URL configured: running locally with an embedded server")
		local = true
	}

	runDir := filepath.Join(cfg.RunsDir, runID)
	dir, err := claimRunDir(runDir, true, log)
	if err != nil {
		return err
	}
	defer dir.release()
	sink, where, err := stores.OpenResults(ctx, cfg.Store, rundir.Dir(runDir), log)
	if err != nil {
		return err
	}
	workersWrite := local || cfg.Store.ClickHouseDSN != ""
	defer logClose(log, "results", sink.Close)
	q, ctx, closeQueue, err := execQueue(ctx, cfg, local, runDir, tasks, o.Pools, sink, log)
	if err != nil {
		return err
	}
	defer closeQueue()
	mode := "cluster"
	if local {
		mode = "local"
	}
	dir.started = true
	if err := writeRunJSON(rundir.Dir(runDir), mode, where, cfg, len(tasks)); err != nil {
		log.Warn("run.json not written", "err", err)
	}
	started := time.Now()
	runRow := results.Run{Run: runID, Status: schema.RunRunning, Title: "exec of " + strings.Join(o.Files, " "), Mode: mode, Config: "{}", TS: started}
	if err := sink.Write(ctx, queuedRows(runRow, tasks)); err != nil {
		log.Warn("results rows not written", "err", err)
	}
	outs, execErr := dispatch.Exec(ctx, q, dispatch.ExecParams{Tasks: tasks, RunID: runID, Logger: log, RunDir: runDir})
	if outs == nil {
		return execErr
	}
	if execErr != nil && dispatch.Unanswered(outs) > 0 {
		cancelUnanswered(ctx, q, runID, outs, log)
	}
	if err := sink.Write(context.Background(), dispatch.OutcomeRows(runRow, outs, !workersWrite)); err != nil {
		log.Warn("results rows not written", "err", err)
	}
	if err := dispatch.WriteResultsFile(filepath.Join(runDir, "results.jsonl"), outs); err != nil {
		log.Warn("results file not written", "err", err)
	}
	if err := printOutcomes(outs, o.JSON); err != nil {
		return err
	}
	failed := 0
	for _, o := range outs {
		if !o.OK() {
			failed++
		}
	}
	if execErr != nil {
		return fmt.Errorf("%d of %d tasks without an answer: %w", dispatch.Unanswered(outs), len(outs), execErr)
	}
	if failed > 0 {
		log.Info("run finished with failures", "run_id", runID, "failed", failed, "tasks", len(outs))
		return exitError(1)
	}
	log.Info("run finished", "run_id", runID, "tasks", len(outs))
	return nil
}

// execQueue is the exec's queue: local mode's embedded server and workers,
// one per pool the tasks name unless pools are given (its context ends when
// a local worker fails), or the cluster's NATS.
func execQueue(ctx context.Context, cfg *config.Scheduler, local bool, runDir string, tasks []*schema.NodeTask, pools []string,
	sink results.Sink, log *slog.Logger) (*queue.Queue, context.Context, func(), error) {
	if !local {
		q, err := queue.Dial(ctx, cfg.NATS.Conn("hpcq-scheduler"), cfg.Queue.Options(), log)
		if err != nil {
			return nil, ctx, nil, err
		}
		return q, ctx, q.Close, nil
	}
	pools = slices.Clone(pools)
	if len(pools) == 0 {
		for _, t := range tasks {
			pools = append(pools, t.Pool)
		}
		slices.Sort(pools)
		pools = slices.Compact(pools)
	}
	var images []string
	for _, t := range tasks {
		if t.Container != nil {
			images = append(images, ownImages(t.Container.Image)...)
		}
	}
	l, lctx, closeLocal, err := startLocal(ctx, cfg, runDir, pools, images, sink, false, nil, log)
	if err != nil {
		return nil, ctx, nil, err
	}
	log.Info("local run", "run_dir", runDir, "workers", max(1, cfg.Workers), "pools", pools)
	return l.Queue, lctx, closeLocal, nil
}

// queuedRows are the rows of an exec that starts: the run, running, and
// its tasks, queued.
func queuedRows(run results.Run, tasks []*schema.NodeTask) results.Rows {
	rows := results.Rows{Runs: []results.Run{run}}
	for _, t := range tasks {
		rows.Nodes = append(rows.Nodes, results.Node{Run: run.Run, Node: t.NodeID, Parent: t.ParentID, Stage: t.Stage, Kind: t.Kind,
			Pool: t.Pool, Attempt: t.Attempt, Status: schema.NodeQueued, TS: run.TS})
	}
	return rows
}

// cancelUnanswered cancels the tasks of an exec that ended before every
// answer: nobody will collect their answers, so the tasks still queued are
// removed and the running ones stopped on their workers.
func cancelUnanswered(ctx context.Context, q *queue.Queue, runID string, outs []dispatch.Outcome, log *slog.Logger) {
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	n, err := q.CancelRun(cctx, runID, "scheduler exec ended: "+context.Cause(ctx).Error())
	cancel()
	if err != nil {
		log.Error("the exec's tasks could not be canceled: they may still run", "err", err)
	} else {
		log.Warn("exec ended before every answer: its tasks are canceled", "removed_from_queue", n, "unanswered", dispatch.Unanswered(outs))
	}
	for i := range outs {
		outs[i].Canceled = outs[i].Result == nil && outs[i].DeadLetter == nil
	}
}

// printOutcomes prints the exec's outcomes: a table, or one JSON record per
// line (rundir.Outcome, as results.jsonl holds them).
func printOutcomes(outs []dispatch.Outcome, asJSON bool) error {
	if !asJSON {
		return dispatch.WriteOutcomes(term.Stdout(), outs)
	}
	enc := json.NewEncoder(os.Stdout)
	for i := range outs {
		if err := enc.Encode(outs[i].Record()); err != nil {
			return err
		}
	}
	return nil
}

// writeRunJSON records the run's resolved configuration, without secrets.
func writeRunJSON(dir rundir.Dir, mode string, where map[string]string, cfg *config.Scheduler, tasks int) error {
	natsURL := config.RedactURL(cfg.NATS.URL)
	if mode == "local" {
		natsURL = "embedded"
	}
	return dir.WriteInfo(rundir.Info{RunID: dir.ID(), Command: "exec", Mode: mode, NATSURL: natsURL, Tasks: tasks, Results: where,
		Version: version.Version, Started: time.Now().UTC(), LocalWorkers: cfg.Workers, Slots: cfg.Slots,
		Queue: map[string]any{"ack_wait": cfg.Queue.AckWait.String(), "max_deliver": cfg.Queue.MaxDeliver,
			"dedup_window": cfg.Queue.DedupWindow.String(), "heartbeat": cfg.Queue.Heartbeat.String()}})
}

// startLocal starts the embedded server and the in-process workers of a
// local run (with gateway, their installer asks the model through the
// run's LLM gateway). images are the container images the run names: the
// workers are its user's own, so these are allowed as if they lay in the
// site's image directories (never a system directory). The returned
// context ends when a local worker fails: nothing would run the tasks any
// more. closeLocal drains the workers and stops the server.
func startLocal(ctx context.Context, cfg *config.Scheduler, runDir string, pools, images []string, sink results.Sink, gateway bool,
	mem memory.Store, log *slog.Logger) (*local.Cluster, context.Context, func(), error) {
	// The in-process workers read the settings a worker process reads
	// (HPCQ_KILL_GRACE, HPCQ_MAX_OUTPUT_BYTES, HPCQ_FETCH_WAIT, HPCQ_ISOLATION,
	// ...), but never exit when idle: the run decides when they stop.
	wc := worker.ConfigFrom(cfg.Tasks, pools)
	wc.IdleExit, wc.Version, wc.Results = 0, version.Version, sink
	pc := executor.ConfigFrom(cfg.Tasks, "")
	pc.Images.Own = images
	if mem != nil {
		// The workers write the nodes' recall events into the run's memory
		// as each phase happens, as cluster workers do into Redis.
		pc.Recall = stores.SharedRecall(mem)
	}
	l, err := local.Start(ctx, local.Params{
		RunDir: runDir, Workers: cfg.Workers, Queue: cfg.Queue.Options(), Logger: log, GatewayInstaller: gateway,
		Phases: pc, Worker: wc,
	})
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-l.Failed():
			log.Error("a local worker failed; giving up on the tasks without an answer")
			cancel(errors.New("a local worker failed"))
		case <-ctx.Done():
		}
	}()
	return l, ctx, func() {
		cancel(nil)
		logClose(log, "local workers", l.Close)
	}, nil
}

// ownImages are the refs that name an image by its path (not one pushed
// into the object store), once each.
func ownImages(refs ...string) []string {
	var out []string
	for _, r := range refs {
		if r != "" && !strings.HasPrefix(r, schema.StoredImagePrefix) && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}
