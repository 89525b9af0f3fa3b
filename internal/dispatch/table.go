package dispatch

import (
	"cmp"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hpcq/hpcq/internal/textcut"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/schema"
)

// WriteOutcomes prints one line per task: node, attempt, status, duration,
// exit codes of its phases, worker, metrics, and the error if any.
func WriteOutcomes(w io.Writer, outs []Outcome) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tATTEMPT\tSTATUS\tDURATION\tEXIT CODES\tWORKER\tMETRICS\tERROR")
	for i := range outs {
		o := &outs[i]
		status, dur, codes, worker, metrics, msg := o.Record().Status, "-", "-", "-", "-", ""
		switch {
		case o.Result != nil:
			r := o.Result
			if r.Error != nil {
				msg = fmt.Sprintf("%s in %s: %s", r.Error.Kind, r.Error.Phase, textcut.OneLine(r.Error.Message, 100))
			}
			dur = (time.Duration(r.DurationMS) * time.Millisecond).String()
			var parts []string
			for _, p := range r.Phases {
				if p.Name == schema.PhaseCoding {
					continue
				}
				parts = append(parts, fmt.Sprintf("%s=%d", p.Name, p.ExitCode))
			}
			if len(parts) > 0 {
				codes = strings.Join(parts, " ")
			}
			worker = r.Worker
			metrics = metricsText(r)
		case o.DeadLetter != nil:
			msg = textcut.OneLine(o.DeadLetter.Reason, 100)
			if o.DeadLetter.Worker != "" {
				worker = o.DeadLetter.Worker
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", o.Task.NodeID, o.Task.Attempt, status, dur, codes, worker, metrics, msg)
	}
	return tw.Flush()
}

// metricsText is a result's metrics as the table shows them: with an
// evaluator, its measure first and what the program said of itself after
// it, marked; "-" with none.
func metricsText(r *schema.NodeResult) string {
	own := formatMetrics(r.Metrics)
	ev := r.Evaluation
	if ev == nil {
		return cmp.Or(own, "-")
	}
	if !ev.ByHarness() && ev.Metric != nil {
		return strings.TrimSpace(fmt.Sprintf("median=%g %s of %d runs", *ev.Metric, ev.Unit, len(ev.Samples)-1))
	}
	var parts []string
	if ev.Metric != nil {
		parts = append(parts, strings.TrimSpace(fmt.Sprintf("evaluated=%g %s", *ev.Metric, ev.Unit)))
	}
	if own != "" {
		parts = append(parts, "(self-reported: "+own+")")
	}
	return cmp.Or(strings.Join(parts, " "), "-")
}

// formatMetrics is "a=1 b=2.5", sorted by name, cut after 80 characters.
func formatMetrics(m map[string]float64) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for i, k := range names {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k + "=" + strconv.FormatFloat(m[k], 'g', 6, 64))
	}
	return textcut.OneLine(b.String(), 80)
}

// WriteStats prints per-pool queue state and the worker registry.
func WriteStats(w io.Writer, stats []queue.PoolStats, workers []queue.WorkerStatus) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POOL\tPENDING\tIN FLIGHT\tDEAD-LETTERED\tWORKERS\tLOST")
	for _, s := range stats {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\n", s.Pool, s.Pending, s.InFlight, s.DeadLettered, s.Workers, s.LostWorkers)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tHOST\tPOOLS\tSLOTS\tRUNNING\tSTATE\tLAST SEEN\tTOOLCHAINS")
	for _, ws := range workers {
		state := "live"
		switch {
		case ws.Lost:
			state = "lost"
		case ws.Draining:
			state = "draining"
		}
		tools := make([]string, 0, len(ws.Toolchains))
		for name := range ws.Toolchains {
			tools = append(tools, name)
		}
		sort.Strings(tools)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s ago\t%s\n", ws.ID, ws.Host, strings.Join(ws.Pools, ","), ws.Slots, ws.Running, state,
			ws.SilentFor.Round(time.Second), strings.Join(tools, ","))
	}
	return tw.Flush()
}
