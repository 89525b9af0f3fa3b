// The paper's inputs from the run directory, and the rounds run with the
// run's session: what `scheduler writeup` and a run with writeup.enabled
// call.

package writeup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/hpcq/hpcq/internal/fileio"
	"github.com/hpcq/hpcq/internal/prompt"
	"github.com/hpcq/hpcq/internal/search"
	"github.com/hpcq/hpcq/internal/session"
	"github.com/hpcq/hpcq/internal/textcut"
	"github.com/hpcq/hpcq/internal/tree"
	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// WriteRun has the model write the paper of the session's run around d's
// facts (Write) with the run's client: its calls count against the run's
// budget (usage.json), are rows of llm_calls (purposes writeup and
// writeup_review, node "paper") and, with log_prompts, are logged in the
// paper's directory. The research idea, the final memory export (the
// model's notes), the path to the best node, the setup and the plots of
// the stages' best nodes are added to d; the review runs when the model
// reads images (llm.vision, llm.vlm_model: the review's model). The paper's
// files are written (WritePaper); it returns the paper and what its calls
// used.
func WriteRun(ctx context.Context, s *session.Session, d Drafting) (Paper, llm.Usage, error) {
	before := s.Client.Usage()
	t, err := search.ReadTree(rundir.Dir(s.Dir).Path(rundir.TreeJournal))
	if err != nil {
		return Paper{}, llm.Usage{}, err
	}
	r := &runDir{s: s, tree: t}
	if d.Idea == "" {
		d.Idea = s.IdeaSection(ctx)
	}
	if d.Notes == "" {
		md, _ := s.Spec.Memory.ExportNames()
		if data, err := os.ReadFile(filepath.Join(s.Dir, rundir.MemoryDir, md)); err == nil {
			d.Notes = textcut.Marked(string(data), maxNotesChars)
		}
	}
	if d.Figures == nil {
		d.Figures = r.figures(d.SVG)
		if f, ok := metricFigure(t.Nodes(), s.Spec.Metric.Name, s.Spec.Metric.Unit, d.Facts); ok && d.SVG {
			d.Figures = append(d.Figures, f)
		}
	}
	if d.Setup == "" {
		d.Setup = Setup(s.Dir)
	}
	if d.Path == "" {
		d.Path = r.bestPath()
	}
	d.Review = s.Spec.LLM.VisionOn()
	var logs *prompt.Logs
	if s.Logs != nil {
		logs = &prompt.Logs{Dir: rundir.Dir(s.Dir).Path(rundir.PaperDir)}
		defer logs.Close()
	}
	d.Ask = func(ctx context.Context, purpose prompt.Kind, msgs []llm.Message, shape string, parse func(string) error) error {
		gp := prompt.GenerateParams{Client: s.Client, Messages: msgs, Retries: s.Spec.LLM.Retries, Purpose: string(purpose), Node: PaperNode}
		if gp.Retries == 0 {
			gp.Retries = -1
		}
		if purpose == prompt.WriteupReview {
			gp.Model = s.Spec.LLM.VLMModel
		}
		if logs != nil {
			gp.Observe = func(x prompt.Exchange) {
				if err := logs.Write(PaperNode, string(purpose), x); err != nil {
					s.Log.Warn("prompt log", "err", err)
				}
			}
		}
		_, err := prompt.Ask(ctx, gp, shape, parse)
		s.SaveUsage()
		return err
	}
	paper, err := Write(ctx, d)
	used := s.Client.Usage().Minus(before)
	if err == nil {
		err = WritePaper(rundir.Dir(s.Dir), paper)
	}
	return paper, used, err
}

// runDir is the run a paper is written of: its session and its tree.
type runDir struct {
	s    *session.Session
	tree *search.Tree
}

func (r *runDir) maximize() bool { return r.s.Spec.Metric.Direction == "maximize" }

// best is the run's best node: the held-out gate's when it chose one (the
// best on inputs the search never saw), else the search's.
func (r *runDir) best() (tree.Node, bool) {
	if g, ok, err := rundir.Dir(r.s.Dir).ReadGate(); err == nil && ok && g.Best != "" {
		if n, ok := r.tree.Get(g.Best); ok {
			return n, true
		}
	}
	return r.tree.Best(r.maximize())
}

// approach is the first line of node id's plan's approach ("" without one).
func (r *runDir) approach(id string) string {
	d := rundir.Dir(r.s.Dir)
	data, err := fileio.ReadFile(d.Path(rundir.NodeFile(id, rundir.Phase0Plan)))
	if errors.Is(err, fs.ErrNotExist) {
		data, err = fileio.ReadFile(d.Path(rundir.OldPhase0Plan(id)))
	}
	var p prompt.Plan
	if err != nil || json.Unmarshal(data, &p) != nil {
		return ""
	}
	return textcut.FirstLine(p.Approach, 200)
}

func metricText(v *float64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v, 'g', -1, 64)
}

// maxNotesChars bounds the notes a writeup prompt carries of the final
// memory export.
const maxNotesChars = 24000

// figureMIME are the plots pdflatex includes (an SVG is not one).
var figureMIME = map[string]string{".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".pdf": "application/pdf"}

// bestPath is the path from the root to the run's best node, a line per
// node: its kind, stage, what its plan tried, its outcome ("" with no
// best node).
func (r *runDir) bestPath() string {
	best, ok := r.best()
	if !ok {
		return ""
	}
	var path []tree.Node
	for n, seen := best, map[string]bool{}; !seen[n.ID]; {
		seen[n.ID] = true
		path = append(path, n)
		p, ok := r.tree.Get(n.Parent)
		if n.Parent == "" || !ok {
			break
		}
		n = p
	}
	var b strings.Builder
	for i := len(path) - 1; i >= 0; i-- {
		n := path[i]
		fmt.Fprintf(&b, "- %s, %s node of stage %d", n.ID, n.Kind, n.Stage)
		if a := r.approach(n.ID); a != "" {
			b.WriteString(": " + a)
		}
		switch {
		case n.Buggy:
			b.WriteString(" (failed: " + textcut.FirstLine(n.Reason, 200) + ")")
		case n.HasMetric:
			fmt.Fprintf(&b, " (%s: see its facts)", r.s.Spec.Metric.Name)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Setup says what a run's nodes ran with, from their results: each worker
// and host, the toolchains it found with their versions ("" when no node
// has a result). No count: a number the facts do not hold.
func Setup(runDir string) string {
	entries, err := os.ReadDir(rundir.Dir(runDir).Path(rundir.NodesDir))
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

// figures are the plots of the run's best node and each stage's best, as
// a paper includes them: figures/<role>-<name> (role best, stage1 to
// stage4: a node's first; names that do not change with the node ids), with what the node was
// and what the vision model saw in them; SVGs with svg (the compile makes
// them PDFs). A plot whose content is not what its name says, or over
// MaxFigureBytes, is left out.
func (r *runDir) figures(svg bool) []Figure {
	type role struct{ name, id string }
	var roles []role
	seen := map[string]bool{}
	add := func(name string, n tree.Node, ok bool) {
		if ok && !seen[n.ID] {
			seen[n.ID] = true
			roles = append(roles, role{name, n.ID})
		}
	}
	b, ok := r.best()
	add("best", b, ok)
	for s := 1; s <= len(schema.Stages); s++ {
		b, ok := r.tree.BestOfStage(s, r.maximize())
		add(fmt.Sprintf("stage%d", s), b, ok)
	}
	root, err := os.OpenRoot(r.s.Dir)
	if err != nil {
		return nil
	}
	defer root.Close()
	var figs []Figure
	for _, role := range roles {
		o, ok, err := rundir.Dir(r.s.Dir).ReadOutcome(role.id)
		if err != nil || !ok || o.Result == nil {
			continue
		}
		n, _ := r.tree.Get(role.id)
		what := "the run's best node"
		if role.name != "best" {
			what = "the best node of stage " + strings.TrimPrefix(role.name, "stage")
		}
		about := fmt.Sprintf("a plot of %s, %s node %s (stage %d, %s), %s = %s %s; drawn by the node's own program: a number it shows is "+
			"the program's, not a fact (state none from it)", what, n.Kind, role.id, n.Stage, schema.StageName(n.Stage),
			r.s.Spec.Metric.Name, metricText(o.Metric), r.s.Spec.Metric.Unit)
		if o.PlotAnalysis != "" {
			about += "; the vision model saw: " + strings.Join(strings.Fields(textcut.Marked(o.PlotAnalysis, 600)), " ")
		}
		for _, a := range o.Result.Artifacts {
			ext := strings.ToLower(path.Ext(a.Name))
			mime := figureMIME[ext]
			if ext == ".svg" && svg {
				mime = "svg"
			}
			if a.Kind != schema.ArtifactPlot || mime == "" || len(figs) == MaxFigures {
				continue
			}
			data, err := readRegular(root, rundir.NodeFile(role.id, rundir.ArtifactDir(a), a.Name), MaxFigureBytes)
			if err == nil && !isContent(data, mime) {
				err = fmt.Errorf("its content is not %s", mime)
			}
			if err != nil {
				r.s.Log.Warn("writeup: a plot left out", "node_id", role.id, "plot", a.Name, "err", err)
				continue
			}
			p := path.Join(rundir.FiguresDir, role.name+"-"+figureName(a.Name))
			if seen[p] {
				continue // another plot of the node with the same base name
			}
			seen[p] = true
			figs = append(figs, Figure{Path: p, Node: role.id, About: about, Data: data})
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
