// Markdown for the report and the prompts: code blocks, links, metric text.

package engine

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// bestDetail is the report's section on the best node: metrics and code.
func (o outputs) bestDetail(id string) string {
	var b strings.Builder
	out, ok, _ := o.files.outcome(id)
	if ok && out.Bound != nil && out.Metric != nil {
		bd := out.Bound
		fmt.Fprintf(&b, "### Against the machine\n\nIts %s of %g %s is %.3g%% of the bound of host %s: %s %s at most (%s). "+
			"A metric beyond its host's bound is impossible: the node is buggy, never the best.\n\n",
			o.s.Spec.Metric.Name, *out.Metric, mdText(bd.Unit), 100*bd.Share, mdText(bd.Host), strconv.FormatFloat(bd.Limit, 'g', 4, 64), mdText(bd.Unit), mdText(bd.How))
	}
	if ok && out.Result != nil && len(out.Result.Metrics) > 0 {
		b.WriteString("### Its metrics\n\n| metric | value | unit |\n|---|---|---|\n")
		names := make([]string, 0, len(out.Result.Metrics))
		for k := range out.Result.Metrics {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			fmt.Fprintf(&b, "| %s | %g | %s |\n", k, out.Result.Metrics[k], out.Result.MetricUnits[k])
		}
		b.WriteString("\n")
	}
	if ok && out.Result != nil {
		b.WriteString(environmentText(out.Result.Container))
		b.WriteString(artifactLinks(id, *out))
	}
	if t, ok, _ := o.files.task(id); ok {
		if code := codeText(t, true); code != "" {
			b.WriteString("### Its code\n\n" + code + "\n")
		}
	}
	return b.String()
}

// artifactLinks is markdown linking a node's logs and outputs in the run
// directory (report.md is at its top), its plots shown inline, and what
// did not come home.
func artifactLinks(id string, o rundir.Outcome) string {
	var logs, outputs, plots []string
	for _, a := range o.Result.Artifacts {
		link := rundir.NodeFile(id, rundir.ArtifactDir(a), a.Name)
		switch a.Kind {
		case schema.ArtifactLog:
			logs = append(logs, fmt.Sprintf("[%s](%s)", a.Name, mdURL(link)))
		case schema.ArtifactPlot:
			plots = append(plots, fmt.Sprintf("![%s](%s)", mdText(a.Name), mdURL(link)))
		default:
			outputs = append(outputs, fmt.Sprintf("[%s](%s)", mdText(a.Name), mdURL(link)))
		}
	}
	var b strings.Builder
	if len(logs)+len(outputs)+len(plots) > 0 || o.Result.ArtifactsNote != "" || o.ArtifactsError != "" {
		b.WriteString("### Its files\n\n")
	}
	if len(logs) > 0 {
		b.WriteString("Logs: " + strings.Join(logs, ", ") + "\n\n")
	}
	if len(outputs) > 0 {
		b.WriteString("Outputs: " + strings.Join(outputs, ", ") + "\n\n")
	}
	for _, p := range plots {
		b.WriteString(p + "\n\n")
	}
	if o.PlotAnalysis != "" {
		b.WriteString("What the vision model saw in the plots: " + mdText(o.PlotAnalysis) + "\n\n")
	}
	if o.Result.ArtifactsNote != "" {
		b.WriteString("Left out: " + mdText(o.Result.ArtifactsNote) + "\n\n")
	}
	if o.ArtifactsError != "" {
		b.WriteString("Not fetched: " + mdText(o.ArtifactsError) + "\n\n")
	}
	return b.String()
}

// mdURL escapes a relative path for a markdown link target.
func mdURL(p string) string {
	return (&url.URL{Path: p}).EscapedPath()
}

// codeBlock is content in a fenced markdown block (info string lang), the
// fence longer than any run of backticks in content, so that content
// cannot end the block early; it ends with a blank line.
func codeBlock(lang, content string) string {
	var b strings.Builder
	writeCodeBlock(&b, lang, content)
	return b.String()
}

// writeCodeBlock writes codeBlock(lang, content) to b.
func writeCodeBlock(b *strings.Builder, lang, content string) {
	longest, run := 0, 0
	for i := 0; i < len(content); i++ {
		if content[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	n := max(3, longest+1)
	b.Grow(2*n + len(lang) + len(content) + 4)
	for range n {
		b.WriteByte('`')
	}
	b.WriteString(lang)
	b.WriteByte('\n')
	b.WriteString(content)
	b.WriteByte('\n')
	for range n {
		b.WriteByte('`')
	}
	b.WriteString("\n\n")
}

// mdText keeps a file name or message from being read as markdown.
func mdText(s string) string {
	return strings.NewReplacer("\\", "\\\\", "[", "\\[", "]", "\\]", "*", "\\*", "_", "\\_", "`", "\\`", "<", "&lt;", "\n", " ").Replace(s)
}

func metricText(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%g", *v)
}

// environmentText is markdown on what a node's commands ran in: its image,
// the layers it inherited from its ancestors (what their installs left),
// the layer it left; "" when it ran on the worker's own system.
func environmentText(c *schema.ContainerUsed) string {
	if c == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "### Its environment\n\nThe image `%s` (%s", mdText(c.Image), mdText(c.Kind))
	if c.Digest != "" {
		fmt.Fprintf(&b, ", %s", mdText(shortDigest(c.Digest)))
	}
	fmt.Fprintf(&b, "), run by %s", mdText(c.Runtime))
	switch n := len(c.Layers); n {
	case 0:
		b.WriteString(", as it is (no layer inherited)")
	default:
		short := make([]string, n)
		for i, l := range c.Layers {
			short[i] = "`" + mdText(shortDigest(l)) + "`"
		}
		fmt.Fprintf(&b, ", over the %d layers its ancestors' commands left (%s, the oldest first)", n, strings.Join(short, ", "))
	}
	b.WriteString(".")
	if c.Layer != "" {
		fmt.Fprintf(&b, " It left a layer of its own, `%s` (%s)", mdText(shortDigest(c.Layer)), fmtBytes(c.LayerBytes))
		if c.LayerHolds != "" {
			b.WriteString(": " + mdText(c.LayerHolds))
		}
		b.WriteString(".")
	}
	if c.LayerNote != "" {
		b.WriteString(" " + mdText(c.LayerNote))
	}
	b.WriteString("\n\n")
	return b.String()
}

// shortDigest is a digest's algorithm and first 12 hex digits.
func shortDigest(d string) string {
	alg, hex, ok := strings.Cut(d, ":")
	if !ok || len(hex) <= 12 {
		return d
	}
	return alg + ":" + hex[:12]
}

// fmtBytes is a size in bytes as a reader reads it: 103.2 MB.
func fmtBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
