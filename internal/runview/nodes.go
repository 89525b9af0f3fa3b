package runview

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hpcq/hpcq/internal/filecache"
	"github.com/hpcq/hpcq/internal/textcut"
	"github.com/hpcq/hpcq/internal/tree"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

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
	// Value is the metric of a tree search's node that produced it; Low
	// and High its 95% interval when it was measured by repeats (the
	// dashboard's error bars).
	Value  *float64 `json:"value,omitempty"`
	Low    *float64 `json:"low,omitempty"`
	High   *float64 `json:"high,omitempty"`
	Reason string   `json:"reason,omitempty"`
	// Image is the container image the node ran in (its path); Layers
	// how many layers (its ancestors') it started from over it; Layer the
	// one it left (a digest: what its commands wrote over both).
	Image  string `json:"image,omitempty"`
	Layers int    `json:"layers,omitempty"`
	Layer  string `json:"layer,omitempty"`
	// HeldOut is the held-out gate's verdict on the node, with its metric
	// there ("held 5.81", "incorrect: ..."; "" when it was not gated); the
	// Metric text ends with it too.
	HeldOut string `json:"held_out,omitempty"`
}

// fillDeclined marks the queued nodes of run that a live worker declined.
func fillDeclined(lines []NodeLine, run string, workers []queue.WorkerStatus) {
	type decline struct {
		worker string
		d      queue.DeclinedTask
	}
	last := map[string]decline{}
	for _, w := range workers {
		if w.Lost {
			continue
		}
		for _, d := range w.Declined {
			if d.Run == run && d.At.After(last[d.Node].d.At) {
				last[d.Node] = decline{w.ID, d}
			}
		}
	}
	for i := range lines {
		l := &lines[i]
		dc, ok := last[l.Node]
		if !ok || l.Status != schema.NodeQueued || (l.Attempt != 0 && dc.d.Attempt != l.Attempt) {
			continue
		}
		l.Status = schema.NodeDeclined
		l.Reason = fmt.Sprintf("declined by worker %s %s ago: %s; waiting for a worker that can run it", dc.worker,
			time.Since(dc.d.At).Round(time.Second), dc.d.Reason)
	}
}

// FillRunning fills in the worker, Slurm job and start of the nodes the
// registry's live workers run now, and marks declined (with the reason)
// the queued nodes a live worker recently handed back without running.
func FillRunning(lines []NodeLine, run string, workers []queue.WorkerStatus) {
	defer fillDeclined(lines, run, workers)
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
			if t.Run != run || !ok || lines[i].Status != schema.NodeQueued {
				continue
			}
			l := &lines[i]
			started := t.Started
			l.Status, l.Worker, l.Host, l.SlurmJobID, l.Attempt, l.Started = schema.NodeRunning, w.ID, w.Host, w.SlurmJobID, t.Attempt, &started
			d := time.Since(t.Started).Milliseconds()
			l.DurationMS = &d
		}
	}
}

// ListNodes reads a run directory's nodes (tree search or exec), in node
// order: what each is, and how it ended or where it stands. What it read
// of each file is kept (internal/filecache): a file is read again only once it
// changed, so that listing a run of 10,000 nodes again (the dashboard does
// on every page and node it shows) is a stat per file, not 20,000 reads and
// decodes (0.75 s).
func ListNodes(dir string) ([]NodeLine, error) {
	d := rundir.Dir(dir)
	byID := map[string]*NodeLine{}
	var order []string
	add := func(id string) *NodeLine {
		if l, ok := byID[id]; ok {
			return l
		}
		byID[id] = &NodeLine{Node: id, Status: schema.NodePreparing}
		order = append(order, id)
		return byID[id]
	}
	// A tree search's nodes, also those whose code is still being asked.
	journal := tree.Followed(d.Path(rundir.TreeJournal))
	nodes, file, err := journal.Update()
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	ended := map[string]bool{}
	for _, n := range nodes {
		l := add(n.ID)
		l.Parent, l.Stage, l.Kind = n.Parent, n.Stage, n.Kind
		ended[n.ID] = n.Done
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
		// An ended node's line, once read after its end, is final
		// (tree.Follower): listed again with no stat.
		if ended[l.Node] {
			if line, ok := journal.Kept(file, l.Node, "line"); ok {
				*l = line.(NodeLine)
				continue
			}
		}
		nd := d.Path(rundir.NodeFile(e.Name()))
		if t, err := filecache.Get(filepath.Join(nd, rundir.TaskFile), "task", readTaskFacts); err == nil {
			task := t.(taskFacts)
			l.Status, l.Attempt = schema.NodeQueued, task.attempt
			if l.Kind == "" {
				l.Parent, l.Stage, l.Kind = task.parent, task.stage, task.kind
			}
		}
		r, err := filecache.Get(filepath.Join(nd, rundir.ResultFile), "result", readResultFacts)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		r.(resultFacts).apply(l)
		if ended[l.Node] {
			journal.Keep(file, l.Node, "line", *l)
		}
	}
	if g, err := filecache.Get(d.Path(rundir.GateFile), "gate", readGate); err == nil {
		for _, n := range g.(rundir.Gate).Nodes {
			if l, ok := byID[n.Node]; ok {
				l.HeldOut = heldOutText(n)
				l.Metric = strings.TrimPrefix(l.Metric+"; held-out "+l.HeldOut, "; ")
			}
		}
	}
	out := make([]NodeLine, 0, len(order))
	slices.SortFunc(order, tree.CompareIDs)
	for _, id := range order {
		out = append(out, *byID[id])
	}
	return out, nil
}

func readGate(path string) (any, error) {
	var g rundir.Gate
	ok, err := rundir.ReadJSON(path, &g)
	if err == nil && !ok {
		err = fs.ErrNotExist
	}
	return g, err
}

// heldOutText is a gated node's verdict as its line shows it: "held 5.81",
// "overfit 2.8 (25% below its search standing)", "incorrect: <why>".
func heldOutText(n rundir.GatedNode) string {
	text := n.Verdict
	if n.HeldOutMetric != nil {
		text += " " + strconv.FormatFloat(*n.HeldOutMetric, 'g', 6, 64)
	}
	switch {
	case n.Verdict == rundir.HeldOverfit && n.Drop != nil:
		text += fmt.Sprintf(" (%.0f%% below its search standing)", 100**n.Drop)
	case n.Reason != "" && n.HeldOutMetric == nil:
		text = textcut.OneLine(n.Said(), 180)
	}
	return text
}

// taskFacts is what a node's list line takes from its task.json.
type taskFacts struct {
	attempt, stage int
	parent, kind   string
}

func readTaskFacts(path string) (any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var task schema.NodeTask
	if err := json.Unmarshal(data, &task); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return taskFacts{attempt: task.Attempt, stage: task.Stage, parent: task.ParentID, kind: task.Kind}, nil
}

// resultFacts is what a node's list line takes from its result.json.
type resultFacts struct {
	status, reason string
	ran            bool // a result of its own (not the result cache's)
	worker, host   string
	slurmJobID     string
	image, layer   string
	layers         int
	attempt        int
	started        time.Time
	durationMS     int64
	metric         string
	value          *float64
	spread         *schema.Spread
}

func readResultFacts(path string) (any, error) {
	rec, ok, err := rundir.ReadOutcomeFile(path)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fs.ErrNotExist
	}
	f := resultFacts{status: rec.Status, reason: rec.Reason}
	if r := rec.Result; r != nil && !rec.Cached {
		f.ran, f.worker, f.host, f.slurmJobID, f.attempt, f.started, f.durationMS = true, r.Worker, r.Host, r.SlurmJobID, r.Attempt, r.Started, r.DurationMS
		if c := r.Container; c != nil {
			f.image, f.layers, f.layer = c.Image, len(c.Layers), c.Layer
		}
	}
	f.metric, f.value = metricText(rec)
	if f.value != nil {
		f.spread = rec.Spread
	}
	return f, nil
}

// metricText is a node's metric as its line shows it: an evaluator's
// measure says so, with what the program reported of itself beside it; a
// program's own number alone, where an evaluator judged it, is marked
// self-reported.
func metricText(rec rundir.Outcome) (string, *float64) {
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	r := rec.Result
	switch {
	case rec.Metric != nil && !rec.Buggy:
		text, v := g(*rec.Metric), *rec.Metric
		if sp := rec.Spread; sp != nil {
			text += " [" + g(sp.Low) + ", " + g(sp.High) + "]" // its 95% interval
		}
		if rec.MetricFrom == rundir.MetricFromEvaluator {
			text += " (evaluated"
			if rec.SelfReported != nil {
				text += "; self-reported " + g(*rec.SelfReported)
			}
			text += ")"
		}
		if rec.MetricFrom == rundir.MetricFromRepeats && r != nil && r.Evaluation != nil {
			text += fmt.Sprintf(" (median of %d runs)", len(r.Evaluation.Samples)-1)
		}
		return text, &v
	case r != nil && r.Evaluation.ByHarness() && r.Evaluation.Metric != nil: // an exec's task, measured by its evaluator
		return "evaluated=" + g(*r.Evaluation.Metric), nil
	case rec.Metric == nil && r != nil && len(r.Metrics) > 0: // an exec's task: its first metric
		names := slices.Sorted(maps.Keys(r.Metrics))
		text := names[0] + "=" + g(r.Metrics[names[0]])
		if r.Evaluation.ByHarness() {
			text = "self-reported " + text
		}
		return text, nil
	}
	return "", nil
}

// apply sets the line's fields from the result.
func (f resultFacts) apply(l *NodeLine) {
	l.Status, l.Reason, l.Image, l.Layers, l.Layer = f.status, f.reason, f.image, f.layers, f.layer
	if f.ran {
		started, dur := f.started, f.durationMS
		l.Worker, l.Host, l.SlurmJobID, l.Attempt, l.Started, l.DurationMS = f.worker, f.host, f.slurmJobID, f.attempt, &started, &dur
	}
	if f.metric != "" {
		l.Metric = f.metric
	}
	if f.value != nil {
		v := *f.value
		l.Value = &v
		if sp := f.spread; sp != nil {
			lo, hi := sp.Low, sp.High
			l.Low, l.High = &lo, &hi
		}
	}
}
