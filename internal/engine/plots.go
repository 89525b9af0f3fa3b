package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/hpcq/hpcq/internal/prompt"
	"github.com/hpcq/hpcq/internal/textcut"
	"github.com/hpcq/hpcq/internal/tree"
	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// Seed 003's VLM analysis: where the model accepts images (llm.vision or
// llm.vlm_model), the plots a node brought home are shown to it, and its
// analysis goes into the node's memory, result.json, the report and the
// Plot feedback of the prompts about the node's code.

// plotInput is what the VLM analysis prompt carries of a node's plots.
type plotInput struct {
	text   string      // the Plots section: names, notes, SVG sources
	images []llm.Image // the raster plots
}

// plotsOf reads node id's plots from the run directory (through os.Root:
// nothing outside it is read): PNG, JPEG, GIF and WEBP as images (their
// content must be what the name says), SVG as source text, each within
// the limits; what is left out is named with the reason. budget bounds the
// text (plot_selection_budget_chars), shared by the SVGs.
func (e *engine) plotsOf(id string, artifacts []schema.Artifact, budget int) (plotInput, error) {
	var plots []schema.Artifact
	svgs := 0
	for _, a := range artifacts {
		if a.Kind == schema.ArtifactPlot {
			plots = append(plots, a)
			if isSVG(a.Name) {
				svgs++
			}
		}
	}
	if len(plots) == 0 {
		return plotInput{}, nil
	}
	root, err := os.OpenRoot(e.s.Dir)
	if err != nil {
		return plotInput{}, err
	}
	defer root.Close()
	var in plotInput
	var b strings.Builder
	for _, a := range plots {
		rel := rundir.NodeFile(id, rundir.ArtifactDir(a), a.Name)
		mime, svg := llm.ImageMIME(a.Name), isSVG(a.Name)
		limit := int64(llm.MaxImageBytes)
		if svg {
			limit = int64(max(budget/max(svgs, 1), 200))
		}
		data, whole, err := readHead(root, rel, limit)
		switch {
		case err != nil:
			fmt.Fprintf(&b, "- %s: not read (%v)\n", a.Name, err)
		case svg:
			note := ""
			if !whole {
				note = " (cut: the plot_selection budget)"
			}
			fmt.Fprintf(&b, "- %s (SVG source%s):\n```svg\n%s\n```\n", a.Name, note, strings.TrimRight(strings.ToValidUTF8(string(data), "?"), "\n"))
		case mime == "":
			fmt.Fprintf(&b, "- %s: left out (not an image format the model reads)\n", a.Name)
		case !whole:
			fmt.Fprintf(&b, "- %s: left out (over %d bytes)\n", a.Name, llm.MaxImageBytes)
		case http.DetectContentType(data) != mime:
			fmt.Fprintf(&b, "- %s: left out (its content is %s, not %s)\n", a.Name, http.DetectContentType(data), mime)
		case len(in.images) == llm.MaxImages:
			fmt.Fprintf(&b, "- %s: left out (at most %d images)\n", a.Name, llm.MaxImages)
		default:
			in.images = append(in.images, llm.Image{MIME: mime, Data: data})
			fmt.Fprintf(&b, "- %s (%s, %d bytes): attached as image %d\n", a.Name, mime, len(data), len(in.images))
		}
	}
	in.text = strings.TrimSpace(b.String())
	return in, nil
}

func isSVG(name string) bool { return strings.EqualFold(filepath.Ext(name), ".svg") }

// readHead reads at most limit bytes of a file under root, and whether
// that was all of it.
func readHead(root *os.Root, name string, limit int64) ([]byte, bool, error) {
	f, err := root.Open(name)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, false, errors.New("not in the run directory")
		}
		return nil, false, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(data)) > limit {
		return data[:limit], false, nil
	}
	return data, true, nil
}

// analyzePlots asks for the analysis of the plots node n brought home; ""
// when vision is off, the node has no plots, or no usable answer came (the
// run goes on; the reason is logged).
func (r *runner) analyzePlots(ctx context.Context, n *tree.Node, o rundir.Outcome) string {
	e := r.e
	if !e.s.Spec.LLM.VisionOn() || o.Result == nil || o.Cached {
		return ""
	}
	mcfg := e.s.Spec.Memory.Config
	plots, err := e.plotsOf(n.ID, o.Result.Artifacts, budgetOr(mcfg.PlotSelectionBudgetChars))
	if err != nil {
		e.s.Log.Warn("plots not read", "node_id", n.ID, "err", err)
		return ""
	}
	if plots.text == "" {
		return ""
	}
	pc := e.promptContext(ctx)
	pc.Plots = plots.text
	pc.Code = textcut.Marked(e.nodeCode(n.ID), budgetOr(mcfg.PlottingCodeBudgetChars))
	if e.s.Memory != nil {
		rd, err := e.s.Memory.RenderForPrompt(ctx, n.ID, string(prompt.VLMAnalysis), 0)
		if err != nil {
			e.s.Log.Warn("plot analysis", "node_id", n.ID, "err", err)
			return ""
		}
		pc.Memory = rd.Text
	}
	msgs, err := prompt.Build(prompt.VLMAnalysis, pc)
	if err != nil {
		e.s.Log.Warn("plot analysis", "node_id", n.ID, "err", err)
		return ""
	}
	msgs[len(msgs)-1].Images = plots.images
	p := r.params(n, string(prompt.VLMAnalysis), msgs)
	p.Model = e.s.Spec.LLM.VLMModel
	var analysis string
	_, err = prompt.Ask(ctx, p, `one JSON object {"summary": "..."}`, func(s string) error {
		var err error
		analysis, err = prompt.ParseSummary(s)
		return err
	})
	if err != nil {
		e.s.Log.Warn("plot analysis", "node_id", n.ID, "err", err)
		return ""
	}
	return textcut.Marked(analysis, budgetOr(mcfg.VLMAnalysisBudgetChars))
}
