// What `scheduler run` prints at its end: the nodes and the best, why it
// stopped, the LLM usage and its caveats, where the report, the tree, the
// query and a large store are; the evaluator's account.

package schedcmd

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/hpcq/hpcq/internal/engine"
	"github.com/hpcq/hpcq/internal/gate"
	"github.com/hpcq/hpcq/internal/run"
	"github.com/hpcq/hpcq/internal/search"
	"github.com/hpcq/hpcq/internal/term"
	"github.com/hpcq/hpcq/internal/textcut"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// printSummary is the run's last lines.
func printSummary(spec run.Spec, runDir string, sum engine.Summary) {
	fmt.Printf("\nrun %s: %d nodes (%d buggy, %d from the result cache)", sum.RunID, sum.Nodes, sum.Buggy, sum.CacheHits)
	if sum.HasBest {
		fmt.Printf(", best %s: %s = %s\n", sum.Best.ID, spec.Metric.Name, strings.TrimSpace(fmt.Sprintf("%g %s", sum.Best.Metric, spec.Metric.Unit)))
	} else {
		fmt.Printf(", no node produced %s\n", spec.Metric.Name)
	}
	if sum.StoppedBy != "" {
		fmt.Fprintf(term.Stdout(), "stopped early: %s\n", sum.StoppedBy)
	}
	for _, l := range sum.Unflushed {
		fmt.Fprintf(term.Stdout(), "not yet applied: %s\n", l)
	}
	u := sum.Usage
	fmt.Printf("LLM: %d calls, %d tokens in, %d out, %s\n", u.Calls, u.TokensIn, u.TokensOut, u.Cost())
	if c := u.Caveats(); c != "" {
		fmt.Printf("LLM: %s\n", c)
	}
	// Absolute paths, and the binary that ran: the hint works from any
	// directory.
	abs, err := filepath.Abs(runDir)
	if err != nil {
		abs = runDir
	}
	fmt.Printf("report: %s\ntree:   %s\nquery:  %s query --run-dir %s \"SELECT node, stage, kind, status, metric_value FROM nodes ORDER BY node\"\n",
		filepath.Join(abs, "report.md"), filepath.Join(abs, "tree.html"), selfPath(), abs)
	if n := dirBytes(filepath.Join(abs, rundir.NATSDir)); n >= natsNoteBytes {
		fmt.Printf("store:  %s holds %d MB (the run's queue: its nodes' layers, kept for a resume; %s purge --run-dir %s removes them)\n",
			filepath.Join(abs, rundir.NATSDir), n>>20, selfPath(), abs)
	}
}

// natsNoteBytes: a local run's store this large is said at its end (the
// layers of a run in an image: ~100 MB for one apt-get install).
const natsNoteBytes = 16 << 20

// dirBytes is the size of the regular files under dir (0 when none).
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// printEvaluation prints what the idea's evaluator made of the run's
// nodes and the held-out gate's verdict (gate.Counts).
func printEvaluation(spec run.Spec, runDir string) {
	t, err := search.ReadTree(filepath.Join(runDir, rundir.TreeJournal))
	if err != nil {
		fmt.Fprintf(term.Stderr(), "evaluation: %v\n", err)
		return
	}
	var g *rundir.Gate
	if gt, ok, err := rundir.Dir(runDir).ReadGate(); err == nil && ok {
		g = &gt
	}
	c, err := gate.Count(rundir.Dir(runDir), t.Nodes(), spec.Metric.Name, spec.Metric.Direction == "maximize", g)
	if err != nil {
		fmt.Fprintf(term.Stderr(), "evaluation: %v\n", err)
		return
	}
	fmt.Fprintln(term.Stdout(), c.Line())
	if g == nil {
		return
	}
	for _, n := range g.Nodes {
		line := fmt.Sprintf("  held-out %s (%s): %s", n.Node, strings.Join(n.Roles, ", "), textcut.OneLine(n.Said(), 220))
		if n.HeldOutMetric != nil {
			line += fmt.Sprintf(", %s = %s (search: %.6g)", spec.Metric.Name, strings.TrimSpace(fmt.Sprintf("%.6g %s", *n.HeldOutMetric, spec.Metric.Unit)), n.SearchMetric)
		}
		fmt.Fprintln(term.Stdout(), line)
	}
	if g.Best != "" && g.Best != g.SearchBest {
		fmt.Fprintf(term.Stdout(), "the run's best is %s, the best on the held-out inputs (the search's best was %s)\n", g.Best, g.SearchBest)
	}
}
