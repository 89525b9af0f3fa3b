package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/pkg/dispatch"
	"github.com/hpcq/hpcq/pkg/engine"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/rundir"
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
	var snap *engine.Snapshot
	if cfg.NATS.URL != "" && o.RunDir == "" {
		if q, err = queue.Dial(ctx, cfg.NATS.Conn("hpcq-status"), cfg.Queue.Options(), log); err != nil {
			return err
		}
		defer q.Close()
	} else {
		dir := o.RunDir
		if dir == "" {
			if dir, err = newestRun(cfg.RunsDir); err != nil {
				return err
			}
		}
		// A tree search's nodes, from its files: readable while it goes.
		if s, err := engine.ReadSnapshot(dir); err == nil {
			snap = &s
		}
		if snap != nil && !o.JSON {
			if err := snap.Write(os.Stdout); err != nil {
				return err
			}
			fmt.Println()
		}
		if cfg.NATS.URL != "" {
			if q, err = queue.Dial(ctx, cfg.NATS.Conn("hpcq-status"), cfg.Queue.Options(), log); err != nil {
				return err
			}
			defer q.Close()
		} else {
			store := rundir.Dir(dir).Path(rundir.NATSDir)
			if _, err := os.Stat(store); err != nil {
				return fmt.Errorf("run dir %s has no local NATS store: %w", dir, err)
			}
			srv, err := queue.StartEmbedded(queue.EmbeddedOptions{StoreDir: store})
			if err != nil {
				if snap != nil && errors.Is(err, queue.ErrStoreInUse) {
					// The run holds its store: its queue is its own until it ends.
					if o.JSON {
						return json.NewEncoder(os.Stdout).Encode(map[string]any{"run": snap})
					}
					fmt.Println("(the run is going: its embedded queue is readable once it ends)")
					return nil
				}
				if errors.Is(err, queue.ErrStoreInUse) {
					return fmt.Errorf("the run is going (its process holds its NATS store); status reads its queue once it ends: %w", err)
				}
				return fmt.Errorf("open the run's NATS store: %w", err)
			}
			defer srv.Shutdown()
			nc, err := srv.Connect("hpcq-status")
			if err != nil {
				return err
			}
			defer nc.Close()
			if q, err = queue.New(ctx, nc, cfg.Queue.Options(), log); err != nil {
				return err
			}
			if snap == nil && !o.JSON {
				fmt.Printf("run %s (local)\n\n", filepath.Base(dir))
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
	if o.JSON {
		out := map[string]any{"pools": stats, "workers": workers}
		if snap != nil {
			out["run"] = snap
		}
		return json.NewEncoder(os.Stdout).Encode(out)
	}
	return dispatch.WriteStats(os.Stdout, stats, workers)
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
