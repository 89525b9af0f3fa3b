package engine

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hpcq/hpcq/internal/prompt"
	"github.com/hpcq/hpcq/internal/tree"
	"github.com/hpcq/hpcq/internal/writeup"
	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// Writeup has the model write the paper of the run in p.RunDir around d's
// facts (writeup.Write) with the run's client: its calls count against the
// run's budget (usage.json), are rows of llm_calls (purposes writeup and
// writeup_review, node "paper") and, with log_prompts, are logged under
// paper/. The research idea, the final memory export (the model's notes)
// and the plots of the stages' best nodes are added to d; the review runs
// when the model reads images (llm.vision, llm.vlm_model: the review's
// model). It returns the paper and what its calls used.
func Writeup(ctx context.Context, p Params, d writeup.Drafting) (writeup.Paper, llm.Usage, error) {
	e, err := newEngine(ctx, p, false)
	if err != nil {
		return writeup.Paper{}, llm.Usage{}, err
	}
	defer e.close()
	before := e.metered.Usage()
	if d.Idea == "" {
		d.Idea = e.ideaSection(ctx)
	}
	if d.Notes == "" {
		md, _ := e.spec.Memory.ExportNames()
		if data, err := os.ReadFile(filepath.Join(e.dir, memoryDir, md)); err == nil {
			d.Notes = cutText(string(data), maxNotesChars)
		}
	}
	if d.Figures == nil {
		d.Figures = e.figures(d.SVG)
	}
	if d.Setup == "" {
		d.Setup = Setup(e.dir)
	}
	if d.Path == "" {
		d.Path = e.bestPath()
	}
	d.Review = e.spec.LLM.VisionOn()
	var logs *prompt.Logs
	if e.logs != nil {
		logs = &prompt.Logs{Dir: rundir.Dir(e.dir).Path(rundir.PaperDir)}
		defer logs.Close()
	}
	d.Ask = func(ctx context.Context, purpose prompt.Kind, msgs []llm.Message, shape string, parse func(string) error) error {
		gp := prompt.GenerateParams{Client: e.client, Messages: msgs, Retries: e.spec.LLM.Retries, Purpose: string(purpose), Node: writeup.PaperNode}
		if gp.Retries == 0 {
			gp.Retries = -1
		}
		if purpose == prompt.WriteupReview {
			gp.Model = e.spec.LLM.VLMModel
		}
		if logs != nil {
			gp.Observe = func(x prompt.Exchange) {
				if err := logs.Write(writeup.PaperNode, string(purpose), x); err != nil {
					e.log.Warn("prompt log", "err", err)
				}
			}
		}
		_, err := prompt.Ask(ctx, gp, shape, parse)
		e.usage.save()
		return err
	}
	paper, err := writeup.Write(ctx, d)
	used := e.metered.Usage().Minus(before)
	if err != nil {
		return paper, used, err
	}
	if err := writeup.WritePaper(rundir.Dir(e.dir), paper); err != nil {
		return paper, used, err
	}
	end, _, err := rundir.Dir(e.dir).ReadEnd()
	if err != nil {
		return paper, used, err
	}
	return paper, used, e.writeReport(e.reportParams(end.StoppedBy, end.Notes))
}

// paperSection is report.md's section about the run's paper, from
// paper/claims.json ("" when there is none).
func (e *engine) paperSection() string {
	c, ok, err := rundir.Dir(e.dir).ReadClaims()
	if err != nil || !ok {
		return ""
	}
	var b strings.Builder
	b.WriteString("## The paper\n\n")
	if c.PDF != "" {
		fmt.Fprintf(&b, "[%s](%s) (%d pages), ", c.PDF, mdURL(rundir.PaperFile(c.PDF)), c.Pages)
	} else {
		b.WriteString("Not compiled: ")
	}
	fmt.Fprintf(&b, "[%s](%s), [%s](%s): %d numbers written out, %d verified against the results, %d unverified; "+
		"%d facts stated by id; %d citations", rundir.PaperTeX, mdURL(rundir.PaperFile(rundir.PaperTeX)), rundir.ClaimsFile,
		mdURL(rundir.PaperFile(rundir.ClaimsFile)), c.Numbers, c.Verified,
		c.Unverified, len(c.FactsCited), len(c.Citations))
	if len(c.CitationsRemoved) > 0 {
		fmt.Fprintf(&b, ", %d removed (not in refs.bib: %s)", len(c.CitationsRemoved), strings.Join(c.CitationsRemoved, ", "))
	}
	if len(c.Rounds) > 0 {
		fmt.Fprintf(&b, "; %d rounds", len(c.Rounds))
	}
	b.WriteString(".\n")
	if c.Unverified > 0 {
		b.WriteString("\n**Numbers no result states** (the paper says so on its first page):\n\n")
		for _, cl := range c.UnverifiedClaims() {
			fmt.Fprintf(&b, "- `%s` in \"%s\"\n", cl.Text, mdText(cl.Context))
		}
	}
	if c.Stopped != "" {
		fmt.Fprintf(&b, "\nThe rounds stopped early: %s.\n", mdText(c.Stopped))
	}
	return b.String()
}

// bestPath is the path from the root to the run's best node, a line per
// node: its kind, stage, what its plan tried, its outcome ("" with no
// best node).
func (e *engine) bestPath() string {
	best, ok := e.tree.Best(e.maximize())
	if !ok {
		return ""
	}
	var path []tree.Node
	for n, seen := best, map[string]bool{}; !seen[n.ID]; {
		seen[n.ID] = true
		path = append(path, n)
		p, ok := e.tree.Get(n.Parent)
		if n.Parent == "" || !ok {
			break
		}
		n = p
	}
	var b strings.Builder
	for i := len(path) - 1; i >= 0; i-- {
		n := path[i]
		fmt.Fprintf(&b, "- %s, %s node of stage %d", n.ID, n.Kind, n.Stage)
		if a := e.approach(n.ID); a != "" {
			b.WriteString(": " + a)
		}
		switch {
		case n.Buggy:
			b.WriteString(" (failed: " + firstLine(n.Reason) + ")")
		case n.HasMetric:
			fmt.Fprintf(&b, " (%s: see its facts)", e.spec.Metric.Name)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Setup says what a run's nodes ran with, from their results: each worker
// and host, the toolchains it found with their versions ("" when no node
// has a result). No count: a number the facts do not hold.
func Setup(runDir string) string {
	entries, err := os.ReadDir(filepath.Join(runDir, nodesDir))
	if err != nil {
		return ""
	}
	type where struct{ worker, host string }
	tools := map[where]map[string]string{}
	var order []where
	for _, ent := range entries {
		o, ok, err := rundir.Dir(runDir).ReadOutcome(ent.Name())
		if err != nil || !ok || o.Result == nil {
			continue
		}
		w := where{o.Result.Worker, o.Result.Host}
		if tools[w] == nil {
			tools[w] = map[string]string{}
			order = append(order, w)
		}
		for k, v := range o.Result.Toolchain {
			tools[w][k] = v
		}
	}
	var b strings.Builder
	for _, w := range order {
		fmt.Fprintf(&b, "- worker %s", w.worker)
		if w.host != "" {
			fmt.Fprintf(&b, " on host %s", w.host)
		}
		names := make([]string, 0, len(tools[w]))
		for k := range tools[w] {
			names = append(names, k)
		}
		sort.Strings(names)
		for i, k := range names {
			sep := ", "
			if i == 0 {
				sep = ": "
			}
			fmt.Fprintf(&b, "%s%s %s", sep, k, tools[w][k])
		}
		b.WriteString("\n")
	}
	return b.String()
}

// maxNotesChars bounds the notes a writeup prompt carries of the final
// memory export.
const maxNotesChars = 24000

// figureMIME are the plots pdflatex includes (an SVG is not one).
var figureMIME = map[string]string{".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".pdf": "application/pdf"}

// figures are the plots of the run's best node and each stage's best, as
// a paper includes them: figures/<role>-<name> (role best, stage1 to
// stage4: a node's first; names that do not change with the node ids), with what the node was
// and what the vision model saw in them; SVGs with svg (the compile makes
// them PDFs). A plot whose content is not what its name says, or over
// writeup.MaxFigureBytes, is left out.
func (e *engine) figures(svg bool) []writeup.Figure {
	type role struct{ name, id string }
	var roles []role
	seen := map[string]bool{}
	add := func(name string, n tree.Node, ok bool) {
		if ok && !seen[n.ID] {
			seen[n.ID] = true
			roles = append(roles, role{name, n.ID})
		}
	}
	b, ok := e.tree.Best(e.maximize())
	add("best", b, ok)
	for s := 1; s <= len(schema.Stages); s++ {
		b, ok := e.tree.BestOfStage(s, e.maximize())
		add(fmt.Sprintf("stage%d", s), b, ok)
	}
	root, err := os.OpenRoot(e.dir)
	if err != nil {
		return nil
	}
	defer root.Close()
	var figs []writeup.Figure
	for _, r := range roles {
		o, ok, err := e.nodeOutcome(r.id)
		if err != nil || !ok || o.Result == nil {
			continue
		}
		n, _ := e.tree.Get(r.id)
		what := "the run's best node"
		if r.name != "best" {
			what = "the best node of stage " + strings.TrimPrefix(r.name, "stage")
		}
		about := fmt.Sprintf("a plot of %s, %s node %s (stage %d, %s), %s = %s %s", what, n.Kind, r.id, n.Stage, schema.StageName(n.Stage),
			e.spec.Metric.Name, metricText(o.Metric), e.spec.Metric.Unit)
		if o.PlotAnalysis != "" {
			about += "; the vision model saw: " + strings.Join(strings.Fields(cutText(o.PlotAnalysis, 600)), " ")
		}
		for _, a := range o.Result.Artifacts {
			ext := strings.ToLower(path.Ext(a.Name))
			mime := figureMIME[ext]
			if ext == ".svg" && svg {
				mime = "svg"
			}
			if a.Kind != schema.ArtifactPlot || mime == "" || len(figs) == writeup.MaxFigures {
				continue
			}
			data, whole, err := readHead(root, rundir.NodeFile(r.id, rundir.ArtifactDir(a), a.Name), writeup.MaxFigureBytes)
			if err != nil || !whole || !isContent(data, mime) {
				e.log.Warn("writeup: a plot left out", "node_id", r.id, "plot", a.Name, "err", err, "whole", whole)
				continue
			}
			p := path.Join(rundir.FiguresDir, r.name+"-"+figureName(a.Name))
			if seen[p] {
				continue // another plot of the node with the same base name
			}
			seen[p] = true
			figs = append(figs, writeup.Figure{Path: p, Node: r.id, About: about, Data: data})
		}
	}
	return figs
}

// isContent reports whether a plot's bytes are what its name says.
func isContent(data []byte, mime string) bool {
	if mime == "svg" {
		return bytes.Contains(data[:min(len(data), 4096)], []byte("<svg"))
	}
	return strings.HasPrefix(http.DetectContentType(data), mime)
}

// figureName is a plot's base name as \includegraphics takes it: letters,
// digits, - and _, one dot before the extension.
func figureName(name string) string {
	ext := strings.ToLower(path.Ext(name))
	base := strings.TrimSuffix(path.Base(name), path.Ext(name))
	b := []byte(base)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '-'
		}
	}
	return string(b) + ext
}
