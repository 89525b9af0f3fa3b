package engine

import (
	"fmt"
	"strings"

	"github.com/hpcq/hpcq/pkg/rundir"
)

// heldOutSection is report.md's section about the held-out gate, from
// gate.json ("" when the run has none).
func heldOutSection(dir, metric, unit string) string {
	g, ok, err := rundir.Dir(dir).ReadGate()
	if err != nil || !ok {
		return ""
	}
	var b strings.Builder
	b.WriteString("## The held-out gate\n\n")
	if g.Best != "" && g.BestMetric != nil {
		fmt.Fprintf(&b, "**Best node on the held-out inputs: %s**, %s = %g %s, on %d inputs the search never saw (no prompt, memory or node workspace held them).",
			g.Best, metric, *g.BestMetric, unit, g.Inputs)
	} else {
		fmt.Fprintf(&b, "**No gated node was correct on the %d held-out inputs.**", g.Inputs)
	}
	if g.SearchBest != "" && g.SearchBest != g.Best {
		fmt.Fprintf(&b, " The search's best was %s.", g.SearchBest)
	}
	how := "its metric"
	if g.Relative {
		how = "its speedup over the baseline " + g.Baseline
	}
	fmt.Fprintf(&b, " A node is overfit when %s falls more than %.0f%% from the search to the held-out inputs.\n\n", how, 100*g.OverfitShare)
	b.WriteString("| node | role | search | held out | verdict |\n|---|---|---|---|---|\n")
	for _, n := range g.Nodes {
		held := "-"
		if n.HeldOutMetric != nil {
			held = fmt.Sprintf("%g", *n.HeldOutMetric)
		}
		verdict := strings.ReplaceAll(mdText(n.Said()), "|", "\\|")
		fmt.Fprintf(&b, "| %s | %s | %g | %s | %s |\n", n.Node, strings.Join(n.Roles, ", "), n.SearchMetric, held, verdict)
	}
	return b.String()
}
