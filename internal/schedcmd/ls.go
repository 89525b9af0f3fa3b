package schedcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/runview"
	"github.com/hpcq/hpcq/internal/term"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// LsOptions are what `scheduler ls` is asked.
type LsOptions struct {
	RunDir string
	JSON   bool
	Out    io.Writer
	Log    *slog.Logger
}

// Ls prints a line per node of a run: from its directory (readable while it
// goes), with the worker and Slurm job of the running nodes from the
// worker registry when the run's server answers.
func Ls(ctx context.Context, cfg *config.Scheduler, o LsOptions) error {
	dir, err := runDirOf(cfg, o.RunDir)
	if err != nil {
		return err
	}
	lines, err := runview.ListNodes(dir)
	if err != nil {
		return err
	}
	waiting := false
	for _, l := range lines {
		waiting = waiting || schema.Waiting(l.Status)
	}
	note := ""
	if waiting {
		if q, closeQ, err := runQueue(ctx, cfg, dir, "hpcq-ls", false, o.Log); err != nil {
			note = "the run's server does not answer (" + err.Error() + "): published nodes show as queued"
		} else {
			workers, werr := q.Workers(ctx)
			closeQ()
			if werr != nil {
				note = "worker registry unreadable: " + werr.Error()
			}
			runview.FillRunning(lines, rundir.Dir(dir).ID(), workers)
		}
	}
	if o.Out == nil {
		o.Out = term.Stdout()
	}
	if o.JSON {
		enc := json.NewEncoder(o.Out)
		for _, l := range lines {
			if err := enc.Encode(l); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(o.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTAGE\tKIND\tSTATUS\tATTEMPT\tWORKER\tSLURM_JOB\tSTARTED\tDURATION\tMETRIC")
	for _, l := range lines {
		started, dur := "-", "-"
		if l.Started != nil {
			started = l.Started.Local().Format("15:04:05")
		}
		if l.DurationMS != nil {
			dur = (time.Duration(*l.DurationMS) * time.Millisecond).Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", l.Node, dash(strconv.Itoa(l.Stage), l.Stage == 0), dash(l.Kind, l.Kind == ""),
			l.Status, dash(strconv.Itoa(l.Attempt), l.Attempt == 0), dash(l.Worker, l.Worker == ""), dash(l.SlurmJobID, l.SlurmJobID == ""),
			started, dur, dash(l.Metric, l.Metric == ""))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if note != "" {
		fmt.Fprintln(o.Out, "("+note+")")
	}
	return nil
}

func dash(s string, empty bool) string {
	if empty {
		return "-"
	}
	return s
}
