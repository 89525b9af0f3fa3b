package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
	"github.com/hpcq/hpcq/pkg/search"
)

// LsOptions are what `scheduler ls` is asked.
type LsOptions struct {
	RunDir string
	JSON   bool
	Out    io.Writer
	Log    *slog.Logger
}

// NodeLine is one node as `scheduler ls` shows it.
type NodeLine struct {
	Node       string     `json:"node"`
	Parent     string     `json:"parent,omitempty"`
	Stage      int        `json:"stage,omitempty"`
	Kind       string     `json:"kind,omitempty"`
	Status     string     `json:"status"`
	Attempt    int        `json:"attempt,omitempty"`
	Worker     string     `json:"worker,omitempty"`
	Host       string     `json:"host,omitempty"`
	SlurmJobID string     `json:"slurm_job_id,omitempty"`
	Started    *time.Time `json:"started,omitempty"`
	DurationMS *int64     `json:"duration_ms,omitempty"`
	Metric     string     `json:"metric,omitempty"`
	Reason     string     `json:"reason,omitempty"`
}

// Status of a node not finished, besides the results table's words.
const (
	lsPreparing = "preparing" // its plan and code are being asked of the model
	lsQueued    = "queued"    // published; no worker reported it running (yet)
	lsRunning   = "running"
)

// nodeRecord reads nodes/<id>/result.json of both kinds of runs: a tree
// search's outcome and an exec's result line.
type nodeRecord struct {
	Status     string             `json:"status"` // exec
	Buggy      bool               `json:"buggy"`
	NotRun     bool               `json:"not_run"`
	Canceled   bool               `json:"canceled"`
	Cached     bool               `json:"cached"`
	Reason     string             `json:"reason"`
	Metric     *float64           `json:"metric"`
	Result     *schema.NodeResult `json:"result"`
	DeadLetter *json.RawMessage   `json:"dead_letter"`
}

func (r nodeRecord) status() string {
	switch {
	case r.Status != "":
		return r.Status
	case r.Canceled:
		return results.NodeCanceled
	case r.DeadLetter != nil:
		return results.NodeDeadLettered
	case r.Cached:
		return results.NodeCached
	case r.NotRun:
		return results.NodeNotRun
	case r.Buggy:
		return results.NodeFailed
	}
	return results.NodeOK
}

// Ls prints a line per node of a run: from its directory (readable while it
// goes), with the worker and Slurm job of the running nodes from the
// worker registry when the run's server answers.
func Ls(ctx context.Context, cfg *config.Scheduler, o LsOptions) error {
	dir, err := runDirOf(cfg, o.RunDir)
	if err != nil {
		return err
	}
	lines, err := ListNodes(dir)
	if err != nil {
		return err
	}
	unfinished := false
	for _, l := range lines {
		unfinished = unfinished || l.Status == lsQueued
	}
	note := ""
	if unfinished {
		if q, closeQ, err := runQueue(ctx, cfg, dir, "hpcq-ls", false, o.Log); err != nil {
			note = "the run's server does not answer (" + err.Error() + "): published nodes show as queued"
		} else {
			workers, werr := q.Workers(ctx)
			closeQ()
			if werr != nil {
				note = "worker registry unreadable: " + werr.Error()
			}
			running(lines, rundir.Dir(dir).ID(), workers)
		}
	}
	if o.Out == nil {
		o.Out = os.Stdout
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

// running fills in the worker, Slurm job and start of the nodes the
// registry's live workers run now.
func running(lines []NodeLine, run string, workers []queue.WorkerStatus) {
	at := map[string]int{}
	for i, l := range lines {
		at[l.Node] = i
	}
	for _, w := range workers {
		if w.Lost {
			continue
		}
		for _, t := range w.Tasks {
			i, ok := at[t.Node]
			if t.Run != run || !ok || lines[i].Status != lsQueued {
				continue
			}
			l := &lines[i]
			started := t.Started
			l.Status, l.Worker, l.Host, l.SlurmJobID, l.Attempt, l.Started = lsRunning, w.ID, w.Host, w.SlurmJobID, t.Attempt, &started
			d := time.Since(t.Started).Milliseconds()
			l.DurationMS = &d
		}
	}
}

// ListNodes reads a run directory's nodes (tree search or exec), in node
// order: what each is, and how it ended or where it stands.
func ListNodes(dir string) ([]NodeLine, error) {
	d := rundir.Dir(dir)
	byID := map[string]*NodeLine{}
	var order []string
	add := func(id string) *NodeLine {
		if l, ok := byID[id]; ok {
			return l
		}
		byID[id] = &NodeLine{Node: id, Status: lsPreparing}
		order = append(order, id)
		return byID[id]
	}
	// A tree search's nodes, also those whose code is still being asked.
	if tree, err := search.ReadTree(d.Path(filepath.Join(rundir.JournalDir, "tree.journal"))); err == nil {
		for _, n := range tree.Nodes() {
			l := add(n.ID)
			l.Parent, l.Stage, l.Kind = n.Parent, n.Stage, n.Kind
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	entries, err := os.ReadDir(d.Path(rundir.NodesDir))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		l := add(e.Name())
		nd := d.Path(rundir.NodeFile(e.Name()))
		var task schema.NodeTask
		if data, err := os.ReadFile(filepath.Join(nd, rundir.TaskFile)); err == nil && json.Unmarshal(data, &task) == nil {
			l.Status, l.Attempt = lsQueued, task.Attempt
			if l.Kind == "" {
				l.Parent, l.Stage, l.Kind = task.ParentID, task.Stage, task.Kind
			}
		}
		data, err := os.ReadFile(filepath.Join(nd, rundir.ResultFile))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var rec nodeRecord
		if err := json.Unmarshal(data, &rec); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(nd, rundir.ResultFile), err)
		}
		l.Status, l.Reason = rec.status(), rec.Reason
		if r := rec.Result; r != nil && !rec.Cached {
			started, dur := r.Started, r.DurationMS
			l.Worker, l.Host, l.SlurmJobID, l.Attempt, l.Started, l.DurationMS = r.Worker, r.Host, r.SlurmJobID, r.Attempt, &started, &dur
		}
		switch {
		case rec.Metric != nil && !rec.Buggy:
			l.Metric = strconv.FormatFloat(*rec.Metric, 'g', 6, 64)
		case rec.Result != nil && len(rec.Result.Metrics) > 0 && rec.Status != "":
			names := make([]string, 0, len(rec.Result.Metrics))
			for k := range rec.Result.Metrics {
				names = append(names, k)
			}
			sort.Strings(names)
			l.Metric = names[0] + "=" + strconv.FormatFloat(rec.Result.Metrics[names[0]], 'g', 6, 64)
		}
	}
	out := make([]NodeLine, 0, len(order))
	sort.Strings(order)
	for _, id := range order {
		out = append(out, *byID[id])
	}
	return out, nil
}
