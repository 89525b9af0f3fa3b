package schedcmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hpcq/hpcq/internal/artifacts"
	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/stores"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/queue/embedded"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// runQueue connects to the queue of the run in dir: the configured server
// of a cluster run, or the embedded server of a local run that is going
// (its address and password in server.json). With offline, a local run
// that is not going has its store opened instead (its embedded server
// started in this process). The returned function closes what it opened.
func runQueue(ctx context.Context, cfg *config.Scheduler, dir, name string, offline bool, log *slog.Logger) (*queue.Queue, func(), error) {
	d := rundir.Dir(dir)
	info, err := d.ReadInfo()
	if err != nil {
		return nil, nil, err
	}
	if info.Mode != "local" {
		if cfg.NATS.URL == "" {
			return nil, nil, fmt.Errorf("run %s ran in cluster mode on %s: set HPCQ_NATS_URL (or --nats-url) to reach it", info.RunID, info.NATSURL)
		}
		q, err := queue.Dial(ctx, cfg.NATS.Conn(name), cfg.Queue.Options(), log)
		if err != nil {
			return nil, nil, err
		}
		return q, func() { q.Close() }, nil
	}
	srv, err := d.ReadServer()
	if err == nil {
		q, derr := queue.Dial(ctx, queue.ConnConfig{URL: srv.URL, Name: name, User: srv.User, Password: srv.Password, ConnectTimeout: 2 * time.Second},
			cfg.Queue.Options(), log)
		if derr == nil {
			return q, func() { q.Close() }, nil
		}
		// A run killed with -9 leaves its server.json behind.
		err = fmt.Errorf("%w: its embedded server at %s does not answer: %v", rundir.ErrNotRunning, srv.URL, derr)
	}
	if !errors.Is(err, rundir.ErrNotRunning) {
		return nil, nil, err
	}
	if !offline {
		return nil, nil, fmt.Errorf("run %s (local): %w", info.RunID, err)
	}
	emb, serr := embedded.Start(embedded.Options{StoreDir: d.Path(rundir.NATSDir)})
	if serr != nil {
		return nil, nil, fmt.Errorf("run %s (local): open its NATS store: %w", info.RunID, serr)
	}
	nc, serr := emb.Connect(name)
	if serr != nil {
		emb.Shutdown()
		return nil, nil, serr
	}
	q, serr := queue.New(ctx, nc, cfg.Queue.Options(), log)
	if serr != nil {
		nc.Close()
		emb.Shutdown()
		return nil, nil, serr
	}
	return q, func() { nc.Close(); emb.Shutdown() }, nil
}

// runDirOf is the run directory a command is about: the one given, else the
// newest under the runs directory.
func runDirOf(cfg *config.Scheduler, dir string) (string, error) {
	if dir != "" {
		if _, err := rundir.Dir(dir).ReadInfo(); err != nil {
			return "", err
		}
		return dir, nil
	}
	return newestRun(cfg.RunsDir)
}

// CancelOptions are what `scheduler cancel` is asked.
type CancelOptions struct {
	RunDir string
	// Nodes to cancel; none: the whole run.
	Nodes  []string
	Reason string
	Log    *slog.Logger
}

// Cancel stops a run, or some of its nodes: no new node starts, queued
// tasks of the run are removed from the work queue, running ones are
// stopped on their workers and end as canceled; the run's scheduler ends
// the run as canceled.
func Cancel(ctx context.Context, cfg *config.Scheduler, o CancelOptions) error {
	dir, err := runDirOf(cfg, o.RunDir)
	if err != nil {
		return err
	}
	id := rundir.Dir(dir).ID()
	q, closeQ, err := runQueue(ctx, cfg, dir, "hpcq-cancel", false, o.Log)
	if err != nil {
		return fmt.Errorf("cannot cancel: %w", err)
	}
	defer closeQ()
	reason := o.Reason
	if reason == "" {
		reason = "scheduler cancel"
	}
	if len(o.Nodes) > 0 {
		if err := q.CancelNodes(ctx, id, o.Nodes, reason); err != nil {
			return err
		}
		fmt.Printf("run %s: %d node(s) canceled; their tasks are stopped where they run\n", id, len(o.Nodes))
		return nil
	}
	n, err := q.CancelRun(ctx, id, reason)
	if err != nil {
		return err
	}
	fmt.Printf("run %s canceled: %d queued task(s) removed from the work queue; running tasks are stopped on their workers\n", id, n)
	return nil
}

// PurgeOptions are what `scheduler purge` is asked.
type PurgeOptions struct {
	RunDir string
	// Memory also moves the run's memory out of Redis into its run
	// directory (stores.MoveMemoryHome): a cluster run that has ended.
	Memory bool
	Log    *slog.Logger
}

// Purge deletes what the NATS server keeps of a run: its queued tasks,
// results, cancel records and artifacts (the run directory keeps its own
// copies); with Memory, it then moves the run's memory out of Redis.
func Purge(ctx context.Context, cfg *config.Scheduler, o PurgeOptions) error {
	dir, err := runDirOf(cfg, o.RunDir)
	if err != nil {
		return err
	}
	id := rundir.Dir(dir).ID()
	if _, err := rundir.Dir(dir).ReadServer(); err == nil {
		return fmt.Errorf("run %s is going (local: %s exists): cancel it first", id, rundir.ServerFile)
	}
	info, err := rundir.Dir(dir).ReadInfo()
	if err != nil {
		return err
	}
	if o.Memory {
		// Checked first: nothing is purged from either server otherwise.
		if _, err := os.Stat(rundir.Dir(dir).Path(rundir.EndFile)); err != nil {
			return fmt.Errorf("run %s has not ended (no %s): its memory stays in Redis until it has (resume it to its end, or cancel it)", id, rundir.EndFile)
		}
		if !stores.InRedis(info.Memory) {
			return fmt.Errorf("run %s keeps no memory in Redis (run.json: memory %v)", id, info.Memory["store"])
		}
	}
	q, closeQ, err := runQueue(ctx, cfg, dir, "hpcq-purge", true, o.Log)
	if err != nil {
		return err
	}
	defer closeQ()
	tasks, res, err := q.PurgeRun(ctx, id)
	if err != nil {
		return err
	}
	store, err := q.Artifacts(ctx)
	if err != nil {
		return err
	}
	objs, err := artifacts.Purge(ctx, store, id)
	if err != nil {
		return err
	}
	layers := ""
	if info.Mode == "local" { // the store is the run's own: its layers are no one else's
		n, size, err := purgeLayers(ctx, q)
		if err != nil {
			return err
		}
		layers = fmt.Sprintf(", %d layer(s) (%d MB; a resume starts its new nodes without them)", n, size>>20)
	}
	fmt.Printf("run %s purged from the server: %d task(s), %d result(s), %d artifact(s)%s; %s keeps its files\n",
		id, tasks, res, objs, layers, filepath.Clean(dir))
	if !o.Memory {
		return nil
	}
	mv, err := stores.MoveMemoryHome(ctx, cfg.Store, rundir.Dir(dir), o.Log)
	if err != nil {
		return fmt.Errorf("run %s's memory: %w", id, err)
	}
	fmt.Printf("run %s's memory moved out of Redis into %s: %d branch(es), %d core version(s), %d recall event(s), %d summary version(s), %d archival text(s), %d repeat(s); %d Redis key(s) removed (ClickHouse keeps its rows)\n",
		id, mv.File, mv.Branches, mv.Core, mv.Recall, mv.Summaries, mv.Archival, mv.Repeats, mv.Keys)
	return nil
}

// purgeLayers deletes every layer of q's layer store: how many, their bytes.
func purgeLayers(ctx context.Context, q *queue.Queue) (n int, size uint64, err error) {
	store, err := q.Layers(ctx)
	if err != nil {
		return 0, 0, err
	}
	return artifacts.DeleteObjects(ctx, store, func(string) bool { return true })
}
