package search

import (
	"fmt"
	"html/template"
	"io"
	"sort"

	"github.com/hpcq/hpcq/internal/textcut"
	"github.com/hpcq/hpcq/internal/tree"
)

// treeHTML renders the tree as nested lists: no script, no external file;
// every text is escaped (reasons come from compilers and models). A node
// with children is a <details> whose summary is the node's line and what
// lies below it; a large tree opens only the way to the best node and the
// small subtrees, and the children of a node with many are grouped by kind.
var treeHTML = template.Must(template.New("tree").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; }
ul { list-style: none; border-left: 1px solid #ccc; margin: .2em 0 .2em .6em; padding-left: 1em; }
li { margin: .25em 0; }
li.leaf { padding-left: 1.2em; }
summary { cursor: pointer; }
.ok { color: #1a7f37; } .buggy { color: #cf222e; } .open { color: #9a6700; }
.best { font-weight: bold; background: #fff8c5; }
.reason, .below { color: #57606a; font-size: .9em; }
.group { color: #24292f; font-style: italic; }
</style></head><body>
<h1>{{.Title}}</h1>
{{if .Best}}<p>Best node: <a href="#{{.Best}}" class="best">{{.Best}}</a>, {{.Metric}} = {{.BestValue}} {{.Unit}}</p>
<p>The way to it: {{range $i, $n := .Path}}{{if $i}} &rarr; {{end}}<a href="#{{$n.ID}}">{{$n.ID}}</a> {{$n.Kind}}{{end}}</p>{{else}}<p>No node produced the metric.</p>{{end}}
<p>{{.Count}} nodes{{if .Collapsed}}; subtrees of more than {{.OpenBelow}} nodes off the way to the best are closed (click a node to open it){{end}}.</p>
{{define "label"}}<span class="{{.Class}}{{if .IsBest}} best{{end}}">{{.ID}} {{.Kind}}{{if .HasMetric}}: {{.Metric}}{{end}}</span>{{end}}
{{define "reason"}}{{if .Reason}} <span class="reason">{{.Reason}}</span>{{end}}{{end}}
{{define "nodes"}}<ul>{{range .}}{{if or .Children .Groups}}<li id="{{.ID}}"><details{{if .Open}} open{{end}}><summary>{{template "label" .}} <span class="below">({{.Below}} below{{if .BelowBuggy}}, {{.BelowBuggy}} buggy{{end}}{{if .BelowOpen}}, {{.BelowOpen}} unfinished{{end}})</span>{{template "reason" .}}</summary>{{if .Groups}}<ul>{{range .Groups}}<li><details{{if .Open}} open{{end}}><summary><span class="group">{{.Kind}}</span> <span class="below">({{len .Nodes}} nodes{{if .Buggy}}, {{.Buggy}} buggy{{end}}{{if .Unfinished}}, {{.Unfinished}} unfinished{{end}}{{if .Best}}; best {{.Best}}{{end}})</span></summary>{{template "nodes" .Nodes}}</details></li>{{end}}</ul>{{else}}{{template "nodes" .Children}}{{end}}</details></li>{{else}}<li id="{{.ID}}" class="leaf">{{template "label" .}}{{template "reason" .}}</li>{{end}}{{end}}</ul>{{end}}
{{template "nodes" .Roots}}
</body></html>
`))

// openBelow: a subtree of at most this many nodes is shown open; a larger
// one is closed unless it holds the best node.
const openBelow = 50

// groupAbove: the children of a node with more than this many are
// grouped by kind, each group closed unless it holds the way to the best.
const groupAbove = 30

type htmlNode struct {
	ID, Kind, Class, Reason string
	Metric                  float64
	HasMetric, IsBest       bool
	// Below counts the nodes under this one, BelowBuggy and BelowOpen the
	// buggy and unfinished ones among them.
	Below, BelowBuggy, BelowOpen int
	// Open: on the way to the best node, or a small subtree.
	Open     bool
	onPath   bool
	node     *tree.Node
	Children []*htmlNode
	Groups   []*htmlGroup // Children by kind, for a node with many
}

// htmlGroup is the children of one kind of a node with many children.
type htmlGroup struct {
	Kind              string
	Nodes             []*htmlNode
	Buggy, Unfinished int
	Best              string // "n0042 = 5.1": the group's best metric
	Open              bool
}

// WriteTreeHTML writes a static HTML view of the tree.
func WriteTreeHTML(w io.Writer, t *Tree, p ReportParams) error {
	nodes := t.Nodes()
	best, hasBest := t.Best(p.Maximize)
	byID := map[string]*htmlNode{}
	var roots []*htmlNode
	for i, n := range nodes {
		h := &htmlNode{node: &nodes[i], ID: n.ID, Kind: n.Kind, Reason: textcut.FirstLine(n.Reason, 160), Metric: n.Metric, HasMetric: n.HasMetric,
			IsBest: hasBest && n.ID == best.ID, Class: "ok"}
		switch {
		case !n.Done:
			h.Class = "open"
		case n.Buggy:
			h.Class = "buggy"
		}
		byID[n.ID] = h
	}
	parent := map[string]string{}
	for _, n := range nodes {
		h := byID[n.ID]
		if p, ok := byID[n.Parent]; ok && n.Parent != n.ID {
			p.Children = append(p.Children, h)
			parent[n.ID] = n.Parent
		} else {
			roots = append(roots, h)
		}
	}
	sort.SliceStable(roots, func(i, j int) bool { return roots[i].ID < roots[j].ID })
	var path []*htmlNode // root first
	if hasBest {
		seen := map[string]bool{}
		for id, ok := best.ID, true; ok && !seen[id]; id, ok = parent[id] {
			seen[id] = true
			byID[id].onPath = true
			path = append([]*htmlNode{byID[id]}, path...)
		}
	}
	collapsed := false
	for _, r := range roots {
		shape(r, p.Maximize, &collapsed)
	}
	title := p.Title
	if title == "" {
		title = "hpcq run"
	}
	data := map[string]any{"Title": title, "Roots": roots, "Metric": p.MetricName, "Unit": p.Unit, "Best": "", "BestValue": 0.0,
		"Path": path, "Count": len(nodes), "Collapsed": collapsed, "OpenBelow": openBelow}
	if hasBest {
		data["Best"], data["BestValue"] = best.ID, best.Metric
	}
	return treeHTML.Execute(w, data)
}

// shape counts what lies below h, decides what is open, and groups the
// children of a node with many. It walks with an explicit stack: a chain
// of debug nodes may be deep.
func shape(root *htmlNode, maximize bool, collapsed *bool) {
	var order []*htmlNode // parents before children
	for stack := []*htmlNode{root}; len(stack) > 0; {
		h := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		order = append(order, h)
		stack = append(stack, h.Children...)
	}
	for i := len(order) - 1; i >= 0; i-- { // children before parents
		h := order[i]
		for _, c := range h.Children {
			h.Below += 1 + c.Below
			h.BelowBuggy += c.BelowBuggy
			h.BelowOpen += c.BelowOpen
			switch c.Class {
			case "buggy":
				h.BelowBuggy++
			case "open":
				h.BelowOpen++
			}
		}
		h.Open = h.onPath || h.Below <= openBelow
		if len(h.Children) > 0 && !h.Open {
			*collapsed = true
		}
		if len(h.Children) > groupAbove {
			h.Groups = groups(h.Children, maximize)
			for _, g := range h.Groups {
				if !g.Open {
					*collapsed = true
				}
			}
		}
	}
}

// groups sorts children by kind, in the order the kinds first appear.
func groups(children []*htmlNode, maximize bool) []*htmlGroup {
	var out []*htmlGroup
	byKind := map[string]*htmlGroup{}
	for _, c := range children {
		g := byKind[c.Kind]
		if g == nil {
			g = &htmlGroup{Kind: c.Kind}
			byKind[c.Kind] = g
			out = append(out, g)
		}
		g.Nodes = append(g.Nodes, c)
		g.Open = g.Open || c.onPath
		switch c.Class {
		case "buggy":
			g.Buggy++
		case "open":
			g.Unfinished++
		}
	}
	for _, g := range out {
		g.Open = g.Open || len(g.Nodes) <= groupAbove
		members := make([]*tree.Node, len(g.Nodes))
		for i, c := range g.Nodes {
			members[i] = c.node
		}
		if best, ok := bestOf(members, maximize); ok {
			g.Best = fmt.Sprintf("%s = %g", best.ID, best.Metric)
		}
	}
	return out
}
