package search

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/tree"
)

func TestReports(t *testing.T) {
	t.Parallel()
	f := &fake{
		buggy:  func(n *tree.Node) bool { return n.ID == "n0001" },
		metric: func(n *tree.Node) float64 { return map[string]float64{"n0002": 5, "n0003": 4, "n0005": 7.5}[n.ID] },
	}
	tr := NewTree()
	Run(context.Background(), tr, Policy{NumDrafts: 3, DebugProb: 0, MaxDebugDepth: 1, Maximize: true}, f, 1, 6, Async)

	path := filepath.Join(t.TempDir(), "tr.json")
	require.NoError(t, WriteTreeJSON(path, tr, true))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var tj TreeJSON
	require.NoError(t, json.Unmarshal(data, &tj))
	require.Len(t, tj.Nodes, 6)
	require.Equal(t, "n0005", tj.Best)
	require.Nil(t, tj.Nodes[0].Metric, "a buggy node has no metric")
	require.Equal(t, "segfault", tj.Nodes[0].Reason)

	var b bytes.Buffer
	require.NoError(t, WriteReport(&b, tr, ReportParams{Title: "stencil", MetricName: "gflops", Unit: "GFLOP/s", Maximize: true,
		Calls: 12, TokensIn: 1000, TokensOut: 200, CostUSD: 0.0123, StoppedBy: "budget: cost $0.0123 reached the budget"}))
	r := b.String()
	require.Contains(t, r, "# stencil")
	require.Contains(t, r, "**Best node: n0005**, gflops = 7.5 GFLOP/s (maximized).")
	require.Contains(t, r, "| n0002 | draft | gflops = 5 GFLOP/s |\n| n0005 | improve | gflops = 7.5 GFLOP/s |\n\n", "root first")
	require.Contains(t, r, "The search stopped early: budget")
	require.Contains(t, r, "| draft | 2 | 1 | 0 |")
	require.Contains(t, r, "- 1 x segfault")
	require.Contains(t, r, "12 calls, 1000 tokens in, 200 tokens out, $0.0123.")

	b.Reset()
	require.NoError(t, WriteReport(&b, NewTree(), ReportParams{MetricName: "gflops"}))
	require.Contains(t, b.String(), "**No node produced the metric.**")
}

func TestTreeHTML(t *testing.T) {
	t.Parallel()
	f := &fake{
		buggy:  func(n *tree.Node) bool { return n.ID == "n0001" },
		metric: func(n *tree.Node) float64 { return map[string]float64{"n0002": 5}[n.ID] },
	}
	tr := NewTree()
	Run(context.Background(), tr, Policy{NumDrafts: 2, DebugProb: 1, MaxDebugDepth: 1, Maximize: true}, f, 1, 4, Async)
	tr.mu.Lock()
	tr.nodes[0].Reason = `<script>alert("x")</script> in main.c`
	tr.mu.Unlock()
	var b bytes.Buffer
	require.NoError(t, WriteTreeHTML(&b, tr, ReportParams{Title: "stencil <3", MetricName: "gflops", Unit: "GFLOP/s", Maximize: true}))
	h := b.String()
	require.True(t, strings.HasPrefix(h, "<!DOCTYPE html>"))
	require.NotContains(t, h, "<script>")
	require.Contains(t, h, "&lt;script&gt;")
	require.Contains(t, h, "stencil &lt;3")
	require.Contains(t, h, `<span class="ok best">n0002 draft: 5</span>`)
	require.Contains(t, h, `class="buggy">n0001 draft</span>`)
	require.Equal(t, 4, strings.Count(h, `<li id="n000`))
	// A small tree is open throughout; the debug child of n0001 sits under it.
	require.NotContains(t, h, "<details>")
	require.NotContains(t, h, "are closed")
	require.Regexp(t, `<li id="n0001"><details open><summary><span class="buggy">n0001 draft</span> <span class="below">\(1 below\)</span> <span class="reason">[^<]*</span></summary><ul><li id="n000[34]" class="leaf"><span class="[a-z ]+">n000[34] debug`, h)
	require.Contains(t, h, `The way to it: <a href="#n0002">n0002</a> draft</p>`)
}

// TestTreeHTMLLarge: a large tree opens the way to the best node and the
// small subtrees only, and groups the children of a node with many by
// kind, each group with its counts and best.
func TestTreeHTMLLarge(t *testing.T) {
	t.Parallel()
	tr := NewTree()
	add := func(id, parent, kind string, metric float64, buggy bool) {
		tr.add(&tree.Node{ID: id, Parent: parent, Kind: kind, Done: true, Buggy: buggy, Metric: metric, HasMetric: !buggy})
	}
	add("n0001", "", Draft, 1, false)
	add("n0002", "", Draft, 2, false)
	id := 3
	next := func() string { id++; return fmt.Sprintf("n%04d", id-1) }
	for i := range 100 { // n0001: 100 improve children, one of them buggy
		add(next(), "n0001", Improve, float64(i%7), i == 50)
	}
	for range 40 { // and 40 hyperparam children, the last leading to the best
		add(next(), "n0001", Hyperparam, 3, false)
	}
	last := fmt.Sprintf("n%04d", id-1)
	add("n9000", last, Debug, 0, true)
	add("n9001", "n9000", Debug, 99, false)
	for i := range 60 { // n0002: a subtree of 60 nodes off the way
		add(fmt.Sprintf("n7%03d", i), "n0002", Improve, 1, false)
	}
	for i := range 3 { // and a small one under n0003
		add(fmt.Sprintf("n8%03d", i), "n0003", Debug, 1, false)
	}
	var b bytes.Buffer
	require.NoError(t, WriteTreeHTML(&b, tr, ReportParams{Title: "big", MetricName: "gflops", Maximize: true}))
	h := b.String()
	require.Equal(t, 207, strings.Count(h, `<li id="n`), "every node is in the page")
	require.Contains(t, h, `The way to it: <a href="#n0001">n0001</a> draft &rarr; <a href="#`+last+`">`+last+`</a> hyperparam &rarr; <a href="#n9000">n9000</a> debug &rarr; <a href="#n9001">n9001</a> debug</p>`)
	require.Contains(t, h, "subtrees of more than 50 nodes off the way to the best are closed")
	require.Contains(t, h, `<li id="n0001"><details open><summary><span class="ok">n0001 draft: 1</span> <span class="below">(145 below, 2 buggy)</span></summary>`)
	require.Contains(t, h, `<li id="n0002"><details><summary>`, "60 nodes off the way: closed")
	require.Contains(t, h, `<li id="n0003"><details open><summary>`, "a small subtree: open")
	require.Contains(t, h, `<details><summary><span class="group">improve</span> <span class="below">(100 nodes, 1 buggy; best n0009 = 6)</span></summary>`)
	require.Contains(t, h, `<details open><summary><span class="group">hyperparam</span> <span class="below">(40 nodes; best n0103 = 3)</span></summary>`, "the group on the way is open")
	require.Contains(t, h, `<li id="n9001" class="leaf"><span class="ok best">n9001 debug: 99</span>`)
}
