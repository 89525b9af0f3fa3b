package runview

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hpcq/hpcq/internal/filecache"
	"github.com/hpcq/hpcq/internal/run"
	"github.com/hpcq/hpcq/internal/tree"
	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// Snapshot is a run's state as its directory shows it, readable while the
// run goes (`scheduler status`): only files the run writes atomically.
type Snapshot struct {
	RunID   string    `json:"run_id"`
	Title   string    `json:"title"`
	Metric  string    `json:"metric"`
	Unit    string    `json:"unit,omitempty"`
	Nodes   int       `json:"nodes"`   // started
	Done    int       `json:"done"`    // with an outcome
	Buggy   int       `json:"buggy"`   // of the done
	Cached  int       `json:"cached"`  // of the done: result cache hits
	Best    string    `json:"best"`    // node id, "" without one: the held-out gate's when it chose one
	Value   *float64  `json:"value"`   // the best node's metric
	Usage   llm.Usage `json:"usage"`   // as of the last node that ended
	Stopped string    `json:"stopped"` // why the last session stopped early, if it did
	// HeldOut is the held-out gate's verdict when it ran: its Best is the
	// run's best (the best on inputs the search never saw).
	HeldOut *rundir.Gate `json:"held_out,omitempty"`
}

// ReadSnapshot reads a `scheduler run` directory.
func ReadSnapshot(runDir string) (Snapshot, error) {
	var spec run.Spec
	ok, err := rundir.ReadJSON(filepath.Join(runDir, rundir.SpecFile), &spec)
	if err != nil {
		return Snapshot{}, err
	}
	if !ok {
		return Snapshot{}, fmt.Errorf("%s is not the directory of a `scheduler run` (no %s)", runDir, rundir.SpecFile)
	}
	s := Snapshot{RunID: filepath.Base(runDir), Title: spec.Title, Metric: spec.Metric.Name, Unit: spec.Metric.Unit}
	entries, err := os.ReadDir(filepath.Join(runDir, rundir.NodesDir))
	if err != nil && !os.IsNotExist(err) {
		return s, err
	}
	ids := make([]string, 0, len(entries))
	for _, ent := range entries {
		if ent.IsDir() {
			ids = append(ids, ent.Name())
		}
	}
	slices.SortFunc(ids, tree.CompareIDs) // a tie goes to the node made first
	// What was read of a node the tree journal says ended is final
	// (tree.Follower): read again with no stat.
	journal := tree.Followed(filepath.Join(runDir, rundir.TreeJournal))
	nodes, file, err := journal.Update()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return s, err
	}
	done := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		done[n.ID] = n.Done
	}
	maximize := spec.Metric.Direction != "minimize"
	var best tree.Node // the search's rule: in creation order, better beyond the noise (tree.Better)
	for _, id := range ids {
		s.Nodes++
		v, ok := journal.Kept(file, id, "snapshot")
		if !ok || !done[id] {
			v, err = filecache.Get(rundir.Dir(runDir).Path(rundir.NodeFile(id, rundir.ResultFile)), "snapshot", readEnded)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return s, err
			}
			if done[id] {
				journal.Keep(file, id, "snapshot", v)
			}
		}
		o := v.(ended)
		s.Done++
		if o.Buggy {
			s.Buggy++
		}
		if o.Cached {
			s.Cached++
		}
		if n := (tree.Node{ID: id, Metric: metricOr(o.Metric), Q1: o.Q1, Q3: o.Q3, HasSpread: o.HasSpread}); !o.Buggy && o.Metric != nil &&
			(s.Value == nil || tree.Better(n, best, maximize)) {
			v := *o.Metric
			s.Best, s.Value, best = id, &v, n
		}
	}
	if s.Usage, err = ReadUsage(runDir); err != nil {
		return s, err
	}
	end, _, err := rundir.Dir(runDir).ReadEnd()
	if err != nil {
		return s, err
	}
	s.Stopped = end.StoppedBy
	s.heldOut(runDir)
	return s, nil
}

// heldOut reads the held-out gate's verdict, when the run has one: the
// run's best is then the gate's, its metric here its search's (comparable
// with every other node's).
func (s *Snapshot) heldOut(runDir string) {
	g, err := filecache.Get(rundir.Dir(runDir).Path(rundir.GateFile), "gate", readGate)
	if err != nil {
		return
	}
	gate := g.(rundir.Gate)
	s.HeldOut = &gate
	for _, n := range gate.Nodes {
		if n.Node == gate.Best {
			v := n.SearchMetric
			s.Best, s.Value = n.Node, &v
		}
	}
}

// Write prints the snapshot for people.
func (s Snapshot) Write(w io.Writer) error {
	best := "no node has produced " + s.Metric + " yet"
	if s.Value != nil {
		best = fmt.Sprintf("best %s: %s = %g %s", s.Best, s.Metric, *s.Value, s.Unit)
		if s.HeldOut != nil && s.HeldOut.Best == s.Best {
			best += " (the best on the held-out inputs)"
		}
	}
	_, err := fmt.Fprintf(w, "run %s: %s\nnodes: %d started, %d done (%d buggy, %d from the result cache), %d not finished; %s\nLLM: %d calls, %s tokens, %s\n",
		s.RunID, s.Title, s.Nodes, s.Done, s.Buggy, s.Cached, s.Nodes-s.Done, best, s.Usage.Calls, s.Usage.Tokens(), s.Usage.Cost())
	if c := s.Usage.Caveats(); err == nil && c != "" {
		_, err = fmt.Fprintf(w, "LLM: %s\n", c)
	}
	if err == nil && s.Stopped != "" {
		_, err = fmt.Fprintf(w, "stopped early: %s\n", s.Stopped)
	}
	if g := s.HeldOut; err == nil && g != nil {
		verdicts := map[string]int{}
		for _, n := range g.Nodes {
			verdicts[n.Verdict]++
		}
		best := "no gated node was correct there"
		if g.Best != "" && g.BestMetric != nil {
			best = fmt.Sprintf("the run's best is %s: %s = %s", g.Best, s.Metric, strings.TrimSpace(fmt.Sprintf("%.6g %s", *g.BestMetric, s.Unit)))
		}
		_, err = fmt.Fprintf(w, "held-out gate: %d nodes on %d inputs the search never saw (%d held, %d overfit, %d incorrect, %d failed); %s\n",
			len(g.Nodes), g.Inputs, verdicts[rundir.HeldHeld], verdicts[rundir.HeldOverfit], verdicts[rundir.HeldIncorrect], verdicts[rundir.HeldFailed], best)
	}
	return err
}

// ReadSpec reads the resolved spec a run directory keeps (spec.json), for
// a resume or an export, and validates it.
func ReadSpec(runDir string) (run.Spec, error) {
	var spec run.Spec
	ok, err := rundir.ReadJSON(filepath.Join(runDir, rundir.SpecFile), &spec)
	switch {
	case err != nil:
		return spec, err
	case !ok:
		return spec, fmt.Errorf("%s has no %s", runDir, rundir.SpecFile)
	}
	if err := spec.Validate(); err != nil {
		return spec, fmt.Errorf("%s: %w", filepath.Join(runDir, rundir.SpecFile), err)
	}
	return spec, nil
}

// ReadUsage reads the LLM usage a run kept (usage.json: what its budget
// counts on a resume); none is zero usage.
func ReadUsage(runDir string) (llm.Usage, error) {
	var u llm.Usage
	_, err := rundir.ReadJSON(filepath.Join(runDir, rundir.UsageFile), &u)
	return u, err
}

func metricOr(v *float64) float64 {
	if v == nil {
		return 0
	}
	return *v
}

// ended is what a snapshot takes of a node's result.json. A dashboard
// counts a run's results on every page it serves: filecache keeps these,
// so that a file is read again only once it changed.
type ended struct {
	Buggy, Cached bool
	Metric        *float64
	// Q1, Q3 of the repeats the metric is the median of (HasSpread).
	Q1, Q3    float64
	HasSpread bool
}

func readEnded(path string) (any, error) {
	o, ok, err := rundir.ReadOutcomeFile(path)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fs.ErrNotExist
	}
	e := ended{Buggy: o.Buggy, Cached: o.Cached, Metric: o.Metric}
	if sp := o.Spread; sp != nil {
		e.Q1, e.Q3, e.HasSpread = sp.Q1, sp.Q3, true
	}
	return e, nil
}
