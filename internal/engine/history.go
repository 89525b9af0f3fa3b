package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hpcq/hpcq/internal/run"
	"github.com/hpcq/hpcq/internal/search"
	"github.com/hpcq/hpcq/internal/textcut"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// maxEarlierRuns bounds the earlier runs Phase 0 is told about.
const maxEarlierRuns = 5

// earlierRuns summarizes the finished runs of the same idea found beside
// this run's directory (their spec.json and tree.json), newest last: what
// Phase 0 calls the history of earlier runs. Runs that cannot be read are
// left out.
func earlierRuns(runDir string, spec run.Spec) string {
	parent := filepath.Dir(runDir)
	entries, err := os.ReadDir(parent)
	if err != nil {
		return ""
	}
	var lines []string
	for _, ent := range entries {
		dir := filepath.Join(parent, ent.Name())
		if !ent.IsDir() || dir == runDir {
			continue
		}
		var other run.Spec
		if ok, err := rundir.ReadJSON(filepath.Join(dir, rundir.SpecFile), &other); err != nil || !ok ||
			strings.TrimSpace(other.Idea) != strings.TrimSpace(spec.Idea) || other.Metric.Name != spec.Metric.Name {
			continue
		}
		var tree search.TreeJSON
		if ok, err := rundir.ReadJSON(filepath.Join(dir, "tree.json"), &tree); err != nil || !ok {
			continue
		}
		lines = append(lines, summarizeRun(ent.Name(), other, tree))
	}
	sort.Strings(lines) // run ids sort by time
	if len(lines) > maxEarlierRuns {
		lines = lines[len(lines)-maxEarlierRuns:]
	}
	return strings.Join(lines, "\n")
}

func summarizeRun(id string, spec run.Spec, tree search.TreeJSON) string {
	buggy := 0
	reasons := map[string]int{}
	var best *search.NodeJSON
	for i := range tree.Nodes {
		n := &tree.Nodes[i]
		if n.Buggy {
			buggy++
			reasons[textcut.FirstLine(n.Reason, 200)]++
		}
		if n.ID == tree.Best {
			best = n
		}
	}
	s := fmt.Sprintf("- run %s: %d nodes, %d buggy", id, len(tree.Nodes), buggy)
	if best != nil && best.Metric != nil {
		s += fmt.Sprintf("; best %s (%s) %s = %g %s", best.ID, best.Kind, spec.Metric.Name, *best.Metric, spec.Metric.Unit)
	} else {
		s += fmt.Sprintf("; no node produced %s", spec.Metric.Name)
	}
	var top string
	for r, n := range reasons {
		if top == "" || n > reasons[top] || n == reasons[top] && r < top {
			top = r
		}
	}
	if top != "" {
		s += fmt.Sprintf("; most frequent failure (%dx): %s", reasons[top], top)
	}
	return s
}
