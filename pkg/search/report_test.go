package search

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReports(t *testing.T) {
	f := &fake{
		buggy:  func(n *Node) bool { return n.ID == "n0001" },
		metric: func(n *Node) float64 { return map[string]float64{"n0002": 5, "n0003": 4, "n0005": 7.5}[n.ID] },
	}
	tree := NewTree()
	Run(context.Background(), tree, Policy{NumDrafts: 3, DebugProb: 0, MaxDebugDepth: 1, Maximize: true}, f, 1, 6, Async)

	path := filepath.Join(t.TempDir(), "tree.json")
	require.NoError(t, WriteTreeJSON(path, tree, true))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var tj TreeJSON
	require.NoError(t, json.Unmarshal(data, &tj))
	require.Len(t, tj.Nodes, 6)
	require.Equal(t, "n0005", tj.Best)
	require.Nil(t, tj.Nodes[0].Metric, "a buggy node has no metric")
	require.Equal(t, "segfault", tj.Nodes[0].Reason)

	var b bytes.Buffer
	require.NoError(t, WriteReport(&b, tree, ReportParams{Title: "stencil", MetricName: "gflops", Unit: "GFLOP/s", Maximize: true,
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
	f := &fake{
		buggy:  func(n *Node) bool { return n.ID == "n0001" },
		metric: func(n *Node) float64 { return map[string]float64{"n0002": 5}[n.ID] },
	}
	tree := NewTree()
	Run(context.Background(), tree, Policy{NumDrafts: 2, DebugProb: 1, MaxDebugDepth: 1, Maximize: true}, f, 1, 4, Async)
	tree.mu.Lock()
	tree.nodes[0].Reason = `<script>alert("x")</script> in main.c`
	tree.mu.Unlock()
	var b bytes.Buffer
	require.NoError(t, WriteTreeHTML(&b, tree, ReportParams{Title: "stencil <3", MetricName: "gflops", Unit: "GFLOP/s", Maximize: true}))
	h := b.String()
	require.True(t, strings.HasPrefix(h, "<!DOCTYPE html>"))
	require.NotContains(t, h, "<script>")
	require.Contains(t, h, "&lt;script&gt;")
	require.Contains(t, h, "stencil &lt;3")
	require.Contains(t, h, `<span class="ok best">n0002 draft: 5</span>`)
	require.Contains(t, h, `class="buggy">n0001 draft</span>`)
	require.Equal(t, strings.Count(h, "<li>"), 4)
	// The debug child of n0001 sits under it.
	require.Regexp(t, `n0001 draft</span> <span class="reason">[^<]*</span><ul><li><span class="[a-z ]+">n000[34] debug`, h)
}
