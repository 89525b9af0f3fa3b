package search

import (
	"html/template"
	"io"
	"sort"
)

// treeHTML renders the tree as nested lists: no script, no external file;
// every text is escaped (reasons come from compilers and models).
var treeHTML = template.Must(template.New("tree").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; }
ul { list-style: none; border-left: 1px solid #ccc; margin-left: .6em; padding-left: 1em; }
li { margin: .25em 0; }
.ok { color: #1a7f37; } .buggy { color: #cf222e; } .open { color: #9a6700; }
.best { font-weight: bold; background: #fff8c5; }
.reason { color: #57606a; font-size: .9em; }
</style></head><body>
<h1>{{.Title}}</h1>
{{if .Best}}<p>Best node: <span class="best">{{.Best}}</span>, {{.Metric}} = {{.BestValue}} {{.Unit}}</p>{{else}}<p>No node produced the metric.</p>{{end}}
{{define "nodes"}}<ul>{{range .}}<li><span class="{{.Class}}{{if .IsBest}} best{{end}}">{{.ID}} {{.Kind}}{{if .HasMetric}}: {{.Metric}}{{end}}</span>{{if .Reason}} <span class="reason">{{.Reason}}</span>{{end}}{{if .Children}}{{template "nodes" .Children}}{{end}}</li>{{end}}</ul>{{end}}
{{template "nodes" .Roots}}
</body></html>
`))

type htmlNode struct {
	ID, Kind, Class, Reason string
	Metric                  float64
	HasMetric, IsBest       bool
	Children                []*htmlNode
}

// WriteTreeHTML writes a static HTML view of the tree.
func WriteTreeHTML(w io.Writer, t *Tree, p ReportParams) error {
	nodes := t.Nodes()
	best, hasBest := t.Best(p.Maximize)
	byID := map[string]*htmlNode{}
	var roots []*htmlNode
	for _, n := range nodes {
		h := &htmlNode{ID: n.ID, Kind: n.Kind, Reason: firstLine(n.Reason), Metric: n.Metric, HasMetric: n.HasMetric,
			IsBest: hasBest && n.ID == best.ID, Class: "ok"}
		switch {
		case !n.Done:
			h.Class = "open"
		case n.Buggy:
			h.Class = "buggy"
		}
		byID[n.ID] = h
	}
	for _, n := range nodes {
		h := byID[n.ID]
		if parent, ok := byID[n.Parent]; ok && n.Parent != n.ID {
			parent.Children = append(parent.Children, h)
		} else {
			roots = append(roots, h)
		}
	}
	sort.SliceStable(roots, func(i, j int) bool { return roots[i].ID < roots[j].ID })
	title := p.Title
	if title == "" {
		title = "hpcq run"
	}
	data := map[string]any{"Title": title, "Roots": roots, "Metric": p.MetricName, "Unit": p.Unit, "Best": "", "BestValue": 0.0}
	if hasBest {
		data["Best"], data["BestValue"] = best.ID, best.Metric
	}
	return treeHTML.Execute(w, data)
}
