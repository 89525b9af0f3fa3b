// hpcq's own figure of a run, drawn from its results: every number it
// shows is a fact, where a node's plot shows what its program drew.

package writeup

import (
	"fmt"
	"html"
	"math"
	"path"
	"strings"

	"github.com/hpcq/hpcq/internal/tree"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// MetricFigure is the name of hpcq's figure in the paper's figures/.
const MetricFigure = "hpcq-metric-by-node.svg"

// stageColors are the stages' colours (the dashboard's).
var stageColors = []string{"#5f6b7a", "#2f6fde", "#1f9d55", "#d9822b", "#8e44ad"}

// metricFigure draws each node's metric as the search ranked it (its fact
// <node>.value, printed above it as \fact prints it), in node order,
// coloured by stage, its quartiles as whiskers where it was measured by
// repeats. ok is false with fewer than two such nodes.
func metricFigure(nodes []tree.Node, metric, unit string, facts []rundir.Fact) (Figure, bool) {
	have := map[string]bool{}
	for _, f := range facts {
		have[f.ID] = true
	}
	var shown []tree.Node
	top := 0.0
	for _, n := range nodes {
		if n.HasMetric && !n.Buggy && have[n.ID+".value"] && !math.IsNaN(n.Metric) && !math.IsInf(n.Metric, 0) {
			shown = append(shown, n)
			top = math.Max(top, math.Max(n.Metric, n.Q3))
		}
	}
	if len(shown) < 2 || top <= 0 {
		return Figure{}, false
	}
	const W, H, L, R, T, B = 640.0, 300.0, 56.0, 16.0, 28.0, 44.0
	step := (W - L - R) / float64(len(shown))
	sy := func(v float64) float64 { return H - B - math.Max(0, v)/(top*1.1)*(H-T-B) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" font-family="sans-serif" font-size="10">`, W, H, W, H)
	fmt.Fprintf(&b, `<rect width="%g" height="%g" fill="white"/>`, W, H)
	fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/><line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/>`,
		L, T, L, H-B, L, H-B, W-R, H-B)
	fmt.Fprintf(&b, `<text x="14" y="%g" transform="rotate(-90 14 %g)" text-anchor="middle">%s</text>`, (T+H-B)/2, (T+H-B)/2,
		html.EscapeString(strings.TrimSpace(metric+" ("+unit+")")))
	fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="middle">node (in id order), coloured by stage; whiskers: quartiles of its repeats</text>`,
		(L+W-R)/2, H-8)
	for i, n := range shown {
		x, y := L+step*(float64(i)+0.5), sy(n.Metric)
		color := stageColors[min(max(n.Stage, 0), len(stageColors)-1)]
		if n.HasSpread {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`, x, sy(n.Q1), x, sy(n.Q3), color)
		}
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"/>`, x, y, color)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, x, math.Min(y, sy(n.Q3))-7, html.EscapeString(plain(Format(n.Metric))))
		fmt.Fprintf(&b, `<text x="%.1f" y="%g" text-anchor="middle">%s</text>`, x, H-B+14, html.EscapeString(n.ID))
	}
	b.WriteString("</svg>\n")
	about := fmt.Sprintf("drawn by hpcq from the results tables: the %s of each node that produced it, as the search ranked it, in node order "+
		"and coloured by stage; each number it shows is the fact <node>.value (%d nodes); whiskers are the quartiles of a node's repeats", metric, len(shown))
	return Figure{Path: path.Join(rundir.FiguresDir, MetricFigure), About: about, Data: []byte(b.String())}, true
}

// plain is a number as \fact prints it, without TeX's grouping braces.
func plain(s string) string { return strings.ReplaceAll(s, "{,}", ",") }
