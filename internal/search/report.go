package search

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/hpcq/hpcq/internal/jsonw"
	"github.com/hpcq/hpcq/internal/textcut"
	"github.com/hpcq/hpcq/internal/tree"
)

// TreeJSON is tree.json: every node with its parent, kind, outcome and
// times, and the best node.
type TreeJSON struct {
	Nodes []NodeJSON `json:"nodes"`
	Best  string     `json:"best,omitempty"`
}

// NodeJSON is one node of tree.json.
type NodeJSON struct {
	ID       string    `json:"id"`
	Parent   string    `json:"parent,omitempty"`
	Stage    int       `json:"stage,omitempty"`
	Kind     string    `json:"kind"`
	Done     bool      `json:"done"`
	Buggy    bool      `json:"buggy"`
	Reason   string    `json:"reason,omitempty"`
	Metric   *float64  `json:"metric,omitempty"`
	Started  time.Time `json:"started,omitzero"`
	Finished time.Time `json:"finished,omitzero"`
}

// WriteTreeJSON writes tree.json.
func WriteTreeJSON(path string, t *Tree, maximize bool) error {
	var out TreeJSON
	for _, n := range t.Nodes() {
		j := NodeJSON{ID: n.ID, Parent: n.Parent, Stage: n.Stage, Kind: n.Kind, Done: n.Done, Buggy: n.Buggy, Reason: n.Reason, Started: n.Started, Finished: n.Finished}
		if n.HasMetric {
			m := n.Metric
			j.Metric = &m
		}
		out.Nodes = append(out.Nodes, j)
	}
	if b, ok := t.Best(maximize); ok {
		out.Best = b.ID
	}
	data, err := jsonw.MarshalIndent(out)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// ReportParams are what a report says beyond the tree.
type ReportParams struct {
	Title      string
	MetricName string
	Unit       string
	Maximize   bool
	// Usage of the LLM, when there was one.
	Calls, TokensIn, TokensOut int64
	CostUSD                    float64
	// LLMCaveats says what the usage's numbers leave out or estimate
	// (llm.Usage.Caveats).
	LLMCaveats string
	// StoppedBy says why the search stopped early ("budget: ..."), if it did.
	StoppedBy string
	// BestDetail is markdown about the best node (its metrics and code),
	// placed after the path to it.
	BestDetail string
	// StageNotes say how each stage (1-4) went beyond its counts: its
	// base node, why it was skipped.
	StageNotes map[int]string
	// Paper is markdown about the run's paper (its PDF, its claims), when
	// one was written.
	Paper string
	// HeldOut is markdown about the held-out gate (the run's best on the
	// held-out inputs), when it ran: placed first, and the tree's best is
	// then called the search's.
	HeldOut string
}

// WriteReport writes report.md: the best node and the path of decisions
// that led to it, the counts per kind and outcome, the failures met, and
// the LLM usage.
//
// Long: report.md written top to bottom, one block per section.
func WriteReport(w io.Writer, t *Tree, p ReportParams) error {
	nodes := t.Nodes()
	byID := map[string]tree.Node{}
	for _, n := range nodes {
		byID[n.ID] = n
	}
	var b strings.Builder
	title := p.Title
	if title == "" {
		title = "hpcq run"
	}
	fmt.Fprintf(&b, "# %s\n\n", title)
	best, ok := t.Best(p.Maximize)
	dir := "minimized"
	if p.Maximize {
		dir = "maximized"
	}
	if p.HeldOut != "" {
		b.WriteString(strings.TrimSpace(p.HeldOut) + "\n\n")
	}
	if ok {
		what := "Best node"
		if p.HeldOut != "" {
			what = "Best node of the search"
		}
		fmt.Fprintf(&b, "**%s: %s**, %s = %g %s (%s).", what, best.ID, p.MetricName, best.Metric, p.Unit, dir)
		if best.HasSpread {
			fmt.Fprintf(&b, " The median of repeated measurements: half of them within %.4g to %.4g %s.", best.Q1, best.Q3, p.Unit)
		}
		b.WriteString("\n\n")
		var path []tree.Node
		for n, seen := best, map[string]bool{}; ; {
			path = append(path, n)
			seen[n.ID] = true
			parent, found := byID[n.Parent]
			if n.Parent == "" || !found || seen[parent.ID] {
				break
			}
			n = parent
		}
		b.WriteString("## The path to it\n\n| node | kind | outcome |\n|---|---|---|\n")
		for i := len(path) - 1; i >= 0; i-- {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", path[i].ID, path[i].Kind, outcome(path[i], p))
		}
		b.WriteString("\n")
		if p.BestDetail != "" {
			b.WriteString(strings.TrimSpace(p.BestDetail) + "\n\n")
		}
	} else {
		b.WriteString("**No node produced the metric.**\n\n")
	}
	if p.Paper != "" {
		b.WriteString(strings.TrimSpace(p.Paper) + "\n\n")
	}
	writeStages(&b, nodes, p)
	if p.StoppedBy != "" {
		fmt.Fprintf(&b, "The search stopped early: %s.\n\n", p.StoppedBy)
	}
	type count struct{ ok, buggy, open int }
	counts := map[string]*count{}
	var kinds []string
	for _, n := range nodes {
		c := counts[n.Kind]
		if c == nil {
			c = &count{}
			counts[n.Kind] = c
			kinds = append(kinds, n.Kind)
		}
		switch {
		case !n.Done:
			c.open++
		case n.Buggy:
			c.buggy++
		default:
			c.ok++
		}
	}
	sort.Strings(kinds)
	fmt.Fprintf(&b, "## Nodes\n\n%d nodes.\n\n| kind | ok | buggy | unfinished |\n|---|---|---|---|\n", len(nodes))
	for _, k := range kinds {
		c := counts[k]
		fmt.Fprintf(&b, "| %s | %d | %d | %d |\n", k, c.ok, c.buggy, c.open)
	}
	b.WriteString("\n")
	reasons := map[string]int{}
	for _, n := range nodes {
		if n.Buggy {
			reasons[textcut.FirstLine(n.Reason, 160)]++
		}
	}
	if len(reasons) > 0 {
		b.WriteString("## Failures met\n\n")
		var rs []string
		for r := range reasons {
			rs = append(rs, r)
		}
		sort.Slice(rs, func(i, j int) bool {
			return reasons[rs[i]] > reasons[rs[j]] || reasons[rs[i]] == reasons[rs[j]] && rs[i] < rs[j]
		})
		for _, r := range rs {
			fmt.Fprintf(&b, "- %d x %s\n", reasons[r], r)
		}
		b.WriteString("\n")
	}
	if p.Calls > 0 {
		fmt.Fprintf(&b, "## LLM usage\n\n%d calls, %d tokens in, %d tokens out, $%.4f.\n", p.Calls, p.TokensIn, p.TokensOut, p.CostUSD)
		if p.LLMCaveats != "" {
			fmt.Fprintf(&b, "\nOf these: %s.\n", p.LLMCaveats)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeStages writes one row per stage that has nodes or a note.
func writeStages(b *strings.Builder, nodes []tree.Node, p ReportParams) {
	type agg struct {
		n, ok, buggy int
		best         *tree.Node
	}
	per := map[int]*agg{}
	for i := range nodes {
		n := &nodes[i]
		s := stageOf(n)
		a := per[s]
		if a == nil {
			a = &agg{}
			per[s] = a
		}
		a.n++
		switch {
		case n.Done && n.Buggy:
			a.buggy++
		case n.Done:
			a.ok++
			if n.HasMetric && (a.best == nil || tree.Better(*n, *a.best, p.Maximize)) {
				a.best = n
			}
		}
	}
	if len(per) < 2 && len(p.StageNotes) == 0 {
		return // a search without stages
	}
	b.WriteString("## Stages\n\n| stage | nodes | ok | buggy | best | notes |\n|---|---|---|---|---|---|\n")
	for s := 1; s <= len(Stages); s++ {
		a, note := per[s], p.StageNotes[s]
		if a == nil && note == "" {
			continue
		}
		if a == nil {
			a = &agg{}
		}
		best := "-"
		if a.best != nil {
			best = fmt.Sprintf("%s (%g)", a.best.ID, a.best.Metric)
		}
		fmt.Fprintf(b, "| %d %s | %d | %d | %d | %s | %s |\n", s, StageName(s), a.n, a.ok, a.buggy, best, strings.ReplaceAll(textcut.FirstLine(note, 160), "|", "/"))
	}
	b.WriteString("\n")
}

func outcome(n tree.Node, p ReportParams) string {
	switch {
	case !n.Done:
		return "unfinished"
	case n.Buggy:
		return "buggy: " + strings.ReplaceAll(textcut.FirstLine(n.Reason, 160), "|", "/")
	case n.HasMetric && n.HasSpread:
		return fmt.Sprintf("%s = %g %s (median; quartiles %.4g to %.4g)", p.MetricName, n.Metric, p.Unit, n.Q1, n.Q3)
	case n.HasMetric:
		return fmt.Sprintf("%s = %g %s", p.MetricName, n.Metric, p.Unit)
	}
	return "ok"
}
