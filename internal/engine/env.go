package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hpcq/hpcq/internal/run"
	"github.com/hpcq/hpcq/internal/textcut"
	"github.com/hpcq/hpcq/internal/tree"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/schema"
)

// environment is what the prompts say about where nodes run: the
// toolchains the pool's live workers registered.
type environment struct {
	text       string
	resources  string
	toolchains map[string]string // the cache's toolchain fingerprint
	workers    int
	slots      int
}

// imageText is what the Environment section says of the run's container
// image ("" without one).
// ranksText tells the model how a run of MPI ranks is launched when the
// run's limits ask for them (limits.nodes, ranks_per_node).
func (e *engine) ranksText() string {
	l := e.s.Spec.Limits
	if !l.MultiNode() && l.RanksPerNode <= 0 {
		return ""
	}
	nodes := max(1, l.Nodes)
	return fmt.Sprintf("\nEach node's run phase spans %d compute node(s) with %d MPI rank(s) on each (%d in all, %d CPU(s) a rank): "+
		"start the program's ranks with \"$HPCQ_MPIRUN ./prog args\" (the worker sets it: mpirun with the hosts and slots, inside the "+
		"Slurm allocation; do not write your own mpirun line). HPCQ_HOSTS, HPCQ_NODES, HPCQ_RANKS_PER_NODE and HPCQ_RANKS say the "+
		"shape; each rank's output line is tagged with its rank; compile and write files in the workspace, which every node sees.",
		nodes, max(1, l.RanksPerNode), nodes*max(1, l.RanksPerNode), max(1, l.CPUsPerRank))
}

func (e *engine) imageText() string {
	c := e.s.Spec.Container
	if c == nil {
		return ""
	}
	text := fmt.Sprintf("\nEvery node's commands run inside the container image %s, as its root: its files, its shell (bash if it has one, else sh) "+
		"and its PATH; the toolchains listed above are the workers' hosts', not the image's.", filepath.Base(c.Image))
	if p := e.imageTools.Load(); p != nil {
		names := make([]string, 0, len(*p))
		for k, v := range *p {
			names = append(names, strings.TrimSpace(k+" "+v))
		}
		sort.Strings(names)
		text += " The image has (the workers probed it): " + strings.Join(names, "; ") + "."
	} else {
		text += " Check for what you use."
	}
	return text
}

// inheritedLayers are the layers node n starts from over the run's image
// (its parent's, and the one its parent left: the packages its ancestors
// installed), and what the Environment section says of them.
func (e *engine) inheritedLayers(n *tree.Node) ([]string, string) {
	if e.s.Spec.Container == nil || n.Parent == "" {
		return nil, ""
	}
	o, ok, err := e.files.outcome(n.Parent)
	if err != nil || !ok || o.Result == nil {
		return nil, ""
	}
	layers := o.Result.Container.Inherited()
	if len(layers) == 0 {
		return nil, ""
	}
	mine := map[string]bool{}
	for _, l := range layers {
		mine[l] = true
	}
	var holds []string
	for id, hops := n.Parent, 0; id != "" && hops < schema.MaxLayers; hops++ {
		if o, ok, err := e.files.outcome(id); err == nil && ok && o.Result != nil && o.Result.Container != nil {
			if c := o.Result.Container; mine[c.Layer] && c.LayerHolds != "" {
				holds = append([]string{fmt.Sprintf("- node %s: %s", id, c.LayerHolds)}, holds...)
			}
		}
		t, ok, err := e.files.task(id)
		if err != nil || !ok {
			break
		}
		id = t.ParentID
	}
	text := fmt.Sprintf("\nThis node starts from its parent's environment: the image with the %d layer(s) its ancestors' commands wrote over it, "+
		"which the commands run as the container's root may add to (apt-get, pip); what they installed is there, do not install it again.", len(layers))
	if len(holds) > 0 {
		text += "\n" + strings.Join(holds, "\n")
	}
	return layers, text
}

// environment waits up to WaitWorkers for a live worker of the run's pool
// and describes the pool's workers. With none by then (workers that start
// on demand, from slurm-bridge, come when tasks wait) it describes what it
// knows and the run goes on: the nodes' tasks wait in the queue, and the
// environment is read again for every node until workers are there.
func (e *engine) environment(ctx context.Context, wait time.Duration) (environment, error) {
	deadline := time.Now().Add(wait)
	for {
		ws, err := e.p.Queue.Workers(ctx)
		if err != nil {
			return environment{}, err
		}
		env := environment{toolchains: map[string]string{}}
		var lines []string
		for _, w := range ws {
			if w.Lost || w.Draining || !contains(w.Pools, e.s.Spec.Pool) {
				continue
			}
			env.workers++
			env.slots += w.Slots
			names := make([]string, 0, len(w.Toolchains))
			for k, v := range w.Toolchains {
				names = append(names, k)
				if _, ok := env.toolchains[k]; !ok {
					env.toolchains[k] = v
				}
			}
			sort.Strings(names)
			var tcs []string
			for _, k := range names {
				tcs = append(tcs, fmt.Sprintf("%s %s", k, w.Toolchains[k]))
			}
			gpu := ""
			if w.GPUs > 0 {
				gpu = fmt.Sprintf(", %d GPUs", w.GPUs)
			}
			if w.Nodes > 1 {
				gpu += fmt.Sprintf(", an allocation of %d nodes (%s)", w.Nodes, strings.Join(w.Hosts, ", "))
			}
			lines = append(lines, fmt.Sprintf("- worker %s on %s: %d cores, %d slots%s; toolchains: %s", w.ID, w.Host, w.Cores, w.Slots, gpu, strings.Join(tcs, "; ")))
		}
		if env.workers > 0 {
			sort.Strings(lines)
			env.text = fmt.Sprintf("Nodes run in the %q pool, on Linux, each in a fresh workspace with bash; a slot's cores are in OMP_NUM_THREADS. "+
				"Use only these toolchains; nothing else is installed unless the download phase installs it.\n%s", e.s.Spec.Pool, strings.Join(lines, "\n"))
			if len(e.s.Spec.Requires) > 0 {
				env.text += "\nThe run requires: " + strings.Join(e.s.Spec.Requires, ", ") + "."
			}
			env.text += e.imageText() + e.ranksText()
			return env, nil
		}
		if !time.Now().Before(deadline) {
			env.text = fmt.Sprintf("Nodes run in the %q pool, on Linux, each in a fresh workspace with bash; no worker of the pool has "+
				"registered yet, so its toolchains are not known: use common ones (gcc, make) and check for what you need.", e.s.Spec.Pool)
			if len(e.s.Spec.Requires) > 0 {
				env.text += "\nThe run requires: " + strings.Join(e.s.Spec.Requires, ", ") + "."
			}
			env.text += e.imageText() + e.ranksText()
			return env, nil
		}
		select {
		case <-ctx.Done():
			return environment{}, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// setupMemory creates the run's root branch (once) with the idea and the
// resources.
func (e *engine) setupMemory(ctx context.Context) error {
	var idx memory.ResourceIndex
	if e.s.Spec.Resources != "" {
		var err error
		if idx, err = memory.LoadResources(e.s.Spec.Resources, filepath.Dir(e.s.Spec.Resources)); err != nil {
			return err
		}
		e.env.resources = idx.Text()
	}
	if e.s.Memory == nil {
		return nil
	}
	if _, err := e.s.Memory.Fork(ctx, RootBranch, ""); err != nil {
		if errors.Is(err, memory.ErrBranchExists) {
			return nil // a resumed run
		}
		return err
	}
	idea := strings.TrimSpace(e.s.Spec.Idea)
	if run.On(e.s.Spec.Memory.PersistIdeaMD) {
		if _, _, err := e.s.Memory.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: RootBranch, Text: idea, Tags: []string{"IDEA_MD", "ROOT_IDEA"}, Context: "idea"}); err != nil {
			return err
		}
	}
	if run.On(e.s.Spec.Memory.AlwaysInjectIdeaSummary) {
		summary := e.s.Section(ctx, idea, "idea_summary", "a summary of the research idea as short bullet points: the goal, the constraints, the metric")
		if _, err := e.s.Memory.CoreSet(ctx, memory.CoreSetParams{Branch: RootBranch, Key: "IDEA_SUMMARY", Value: summary, Importance: 5}); err != nil {
			return err
		}
	}
	if len(idx.Items) > 0 {
		if err := e.s.Memory.IngestResources(ctx, RootBranch, idx); err != nil {
			return err
		}
	}
	return nil
}

// refreshEnvironment reads the pool's workers again while none was known
// (workers started on demand); the resources stay as they were.
func (e *engine) refreshEnvironment(ctx context.Context) {
	e.envMu.Lock()
	defer e.envMu.Unlock()
	if e.env.workers > 0 {
		return
	}
	env, err := e.environment(ctx, 0)
	if err != nil || env.workers == 0 {
		return
	}
	env.resources = e.env.resources
	e.env = env
	e.s.Log.Info("workers of the pool registered", "pool", e.s.Spec.Pool, "workers", env.workers, "slots", env.slots)
}

// currentEnv is the environment as last read.
func (e *engine) currentEnv() environment {
	e.envMu.Lock()
	defer e.envMu.Unlock()
	return e.env
}

// resources is the Resources section of a prompt about node: each
// resource with its fetch status as the node's branch knows it (a Phase 1
// of an ancestor may have fetched it), within datasets_tested_budget_chars.
func (e *engine) resources(ctx context.Context, node string) string {
	text := e.currentEnv().resources
	if e.s.Memory != nil && text != "" {
		idx, ok, err := e.s.Memory.Resources(ctx, node)
		if err != nil {
			e.s.Log.Warn("resources of the node's memory", "node_id", node, "err", err)
		} else if ok {
			text = idx.Text()
		}
	}
	return textcut.Marked(text, budgetOr(e.s.Spec.Memory.Config.DatasetsTestedBudgetChars))
}

// sweep is seed 004's memory sweep: every memory.sweep_interval_s (and at
// the run's end, with all), the branches of the nodes that ended since the
// last sweep have their repeated episodes consolidated into semantic
// facts. Decay needs no pass of its own: ranking and forget_below apply it
// to every read.
func (e *engine) sweep(ctx context.Context, all bool) {
	interval := time.Duration(e.s.Spec.Memory.Config.SweepIntervalS) * time.Second
	if interval <= 0 {
		interval = time.Duration(memory.Defaults().SweepIntervalS) * time.Second
	}
	e.sweeps.mu.Lock()
	if e.sweeps.last.IsZero() {
		e.sweeps.last = time.Now() // the first interval starts with the run
	}
	if len(e.sweeps.pending) == 0 || (!all && time.Since(e.sweeps.last) < interval) {
		e.sweeps.mu.Unlock()
		return
	}
	branches := e.sweeps.pending
	e.sweeps.pending, e.sweeps.last = nil, time.Now()
	e.sweeps.mu.Unlock()
	facts := 0
	for _, b := range branches {
		got, err := e.s.Memory.Consolidate(ctx, b)
		if err != nil {
			e.s.Log.Warn("memory sweep", "branch", b, "err", err)
			continue
		}
		facts += len(got)
	}
	e.s.Log.Debug("memory sweep", "branches", len(branches), "facts_consolidated", facts)
}

// sweeps are the branches of the nodes that ended since the last memory
// sweep, and when it ran.
type sweeps struct {
	mu      sync.Mutex
	pending []string
	last    time.Time
}
