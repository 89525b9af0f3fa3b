package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hpcq/hpcq/internal/bridge"
	"github.com/hpcq/hpcq/internal/cli"
	"github.com/hpcq/hpcq/pkg/queue"
)

// statusOptions are the flags of `status` beside the common ones.
type statusOptions struct{ jsonOut, clearStale bool }

func statusFlags(o *statusOptions) func(*flag.FlagSet) {
	return func(fs *flag.FlagSet) {
		fs.BoolVar(&o.jsonOut, "json", false, "print JSON")
		fs.BoolVar(&o.clearStale, "clear-stale", false, "remove the recorded status of pools no longer in the configuration")
	}
}

func cmdStatus(args []string) error {
	var o statusOptions
	s, fs, err := setup(args, "status ", "", statusFlags(&o))
	if err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return cli.BadArgs(fs, fmt.Sprintf("unexpected arguments %q", fs.Args()))
	}
	cfg, err := bridge.LoadConfig(s.Config, os.Getenv)
	if err != nil {
		return err
	}
	log, err := s.Log.Logger(os.Stderr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q, err := queue.Dial(ctx, s.NATS.Conn("hpcq-slurm-bridge-status"), s.Queue.Options(), log)
	if err != nil {
		return err
	}
	defer q.Close()
	sts, err := bridge.Statuses(ctx, q, cfg)
	if err != nil {
		return err
	}
	if o.clearStale {
		kept := sts[:0]
		for _, st := range sts {
			if !st.Stale {
				kept = append(kept, st)
				continue
			}
			if err := bridge.ClearStatus(ctx, q, cfg.Name, st.Pool); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "cleared the status of pool %s (not in %s)\n", st.Pool, s.Config)
		}
		sts = kept
	}
	if o.jsonOut {
		return json.NewEncoder(os.Stdout).Encode(sts)
	}
	if len(sts) == 0 {
		fmt.Printf("bridge %s has recorded nothing yet (is it running against this NATS server?)\n", cfg.Name)
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POOL\tBACKLOG\tWORKERS\tJOBS PENDING\tJOBS RUNNING\tSUBMITTED\tPAUSED\tUPDATED\tLAST ERROR")
	for _, st := range sts {
		paused := "no"
		if st.Paused {
			paused = "yes"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", st.Pool, st.Backlog, st.Workers, st.Pending, st.Running, st.Submitted, paused,
			st.Updated.Local().Format("15:04:05"), lastError(st))
	}
	return tw.Flush()
}

// lastError is the LAST ERROR cell of a pool: why it is paused, or its last
// error, on one line (sbatch errors often span several).
func lastError(st bridge.PoolStatus) string {
	reason, lastErr := strings.TrimSpace(st.PausedReason), strings.TrimSpace(st.LastError)
	last := lastErr
	if st.Paused {
		last = reason
		if lastErr != "" && lastErr != reason {
			last += "; since: " + lastErr
		}
	}
	if st.NoQueue {
		last = "no allocation queue serves this pool"
	}
	if st.Stale {
		last = strings.TrimSuffix("stale: no longer in the configuration (--clear-stale removes it); "+last, "; ")
	}
	return strings.Join(strings.Fields(last), " ")
}
