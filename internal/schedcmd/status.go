package schedcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/dispatch"
	"github.com/hpcq/hpcq/internal/runview"
	"github.com/hpcq/hpcq/internal/term"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// StatusOptions are what `scheduler status` is asked.
type StatusOptions struct {
	RunDir string
	JSON   bool
	Log    *slog.Logger
}

// Status prints a run's nodes and best metric (from its files, also while
// it runs) and the queue's pools and workers.
func Status(ctx context.Context, cfg *config.Scheduler, o StatusOptions) error {
	log := o.Log
	var err error
	var q *queue.Queue
	var snap *runview.Snapshot
	dir := o.RunDir
	if cfg.NATS.URL != "" && o.RunDir == "" {
		if q, err = queue.Dial(ctx, cfg.NATS.Conn("hpcq-status"), cfg.Queue.Options(), log); err != nil {
			return err
		}
		defer q.Close()
	} else {
		if dir == "" {
			if dir, err = newestRun(cfg.RunsDir); err != nil {
				return err
			}
		}
		if snap, err = printSnapshot(dir, o.JSON); err != nil {
			return err
		}
		if _, ierr := rundir.Dir(dir).ReadInfo(); ierr != nil && cfg.NATS.URL != "" {
			// Not a run directory hpcq wrote: the configured server.
			if q, err = queue.Dial(ctx, cfg.NATS.Conn("hpcq-status"), cfg.Queue.Options(), log); err != nil {
				return err
			}
			defer q.Close()
		} else {
			// The run's server: the configured one (cluster), the going local
			// run's embedded one (server.json), or the store of a local run
			// that ended.
			var closeQ func()
			if q, closeQ, err = runQueue(ctx, cfg, dir, "hpcq-status", true, log); err != nil {
				if snap == nil {
					return err
				}
				// A cluster run whose server is not reachable (an all-in-one
				// job's ended with it): its directory says what there is.
				return withoutQueue(snap, o.JSON, err)
			}
			defer closeQ()
			if snap == nil && !o.JSON {
				fmt.Printf("run %s\n\n", filepath.Base(dir))
			}
		}
	}
	stats, err := q.Stats(ctx)
	if err != nil {
		return err
	}
	workers, err := q.Workers(ctx)
	if err != nil {
		return err
	}
	var lines []runview.NodeLine
	if dir != "" {
		if lines, err = runview.ListNodes(dir); err != nil {
			return err
		}
		runview.FillRunning(lines, rundir.Dir(dir).ID(), workers)
	}
	if o.JSON {
		out := map[string]any{"pools": stats, "workers": workers}
		if snap != nil {
			out["run"] = snap
		}
		if lines != nil {
			out["unfinished"] = unfinishedCounts(lines)
		}
		return json.NewEncoder(os.Stdout).Encode(out)
	}
	if lines != nil {
		writeUnfinished(term.Stdout(), lines)
	}
	return dispatch.WriteStats(term.Stdout(), stats, workers)
}

// unfinishedCounts are the run's nodes not finished, by where they stand.
func unfinishedCounts(lines []runview.NodeLine) map[string]int {
	n := map[string]int{}
	for _, l := range lines {
		if schema.Unfinished(l.Status) {
			n[l.Status]++
		}
	}
	return n
}

// writeUnfinished says where the nodes not finished stand: being written
// by the model, queued (no worker has taken them), declined by a worker
// (why), running.
func writeUnfinished(w io.Writer, lines []runview.NodeLine) {
	n := unfinishedCounts(lines)
	if len(n) == 0 {
		return
	}
	fmt.Fprintf(w, "not finished: %d preparing (asking the model), %d queued (no worker has taken them yet), %d declined, %d running\n",
		n[schema.NodePreparing], n[schema.NodeQueued], n[schema.NodeDeclined], n[schema.NodeRunning])
	for _, l := range lines {
		if l.Status == schema.NodeDeclined {
			fmt.Fprintf(w, "  %s %s\n", l.Node, l.Reason)
		}
	}
	fmt.Fprintln(w)
}

func newestRun(runsDir string) (string, error) {
	entries, err := os.ReadDir(runsDir)
	if err != nil {
		return "", fmt.Errorf("no NATS URL set and no runs in %s: %w", runsDir, err)
	}
	for i := len(entries) - 1; i >= 0; i-- {
		if entries[i].IsDir() {
			return filepath.Join(runsDir, entries[i].Name()), nil
		}
	}
	return "", fmt.Errorf("no NATS URL set and no runs in %s", runsDir)
}

// withoutQueue is the status of a run whose queue cannot be reached: its
// snapshot (already printed, unless json) and why there is no more.
func withoutQueue(snap *runview.Snapshot, asJSON bool, why error) error {
	if asJSON {
		return json.NewEncoder(os.Stdout).Encode(map[string]any{"run": snap, "queue": "not reachable: " + why.Error()})
	}
	fmt.Printf("queue: not reachable (%v): the above is the run directory's; a run whose job ended has no server left\n", why)
	return nil
}

// printSnapshot reads a tree search's nodes from its files (readable while
// it goes) and prints them unless asJSON; nil when dir is no tree search.
func printSnapshot(dir string, asJSON bool) (*runview.Snapshot, error) {
	s, err := runview.ReadSnapshot(dir)
	if err == nil && !asJSON {
		if err := s.Write(term.Stdout()); err != nil {
			return nil, err
		}
		fmt.Println()
	}
	if err == nil {
		return &s, nil
	}
	return nil, nil // not a tree search: the queue alone
}
