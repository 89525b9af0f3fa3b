// What a run leaves for its readers, written at its end and again by
// `scheduler export` or after its paper: tree.json, tree.html, report.md,
// the memory export.

package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/hpcq/hpcq/internal/run"
	"github.com/hpcq/hpcq/internal/search"
	"github.com/hpcq/hpcq/internal/session"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// Files a run writes at its top for people.
const (
	reportFile   = "report.md"
	treeJSONFile = "tree.json"
	treeHTMLFile = "tree.html"
)

// Export writes a run's outputs again from its directory (tree.json,
// tree.html, report.md, and with the session's memory the memory export),
// running nothing: what the last session of the run recorded about its end
// (early stop, stage notes) is said again. It returns report.md's path.
func Export(ctx context.Context, s *session.Session) (string, error) {
	return rewrite(ctx, s, true)
}

// WriteReport writes report.md again from the run's directory (after its
// paper was written: the report's section on it).
func WriteReport(ctx context.Context, s *session.Session) error {
	_, err := rewrite(ctx, s, false)
	return err
}

func rewrite(ctx context.Context, s *session.Session, all bool) (string, error) {
	t, err := search.ReadTree(filepath.Join(s.Dir, rundir.TreeJournal))
	if err != nil {
		return "", err
	}
	end, _, err := rundir.Dir(s.Dir).ReadEnd()
	if err != nil {
		return "", err
	}
	out := outputs{s: s, tree: t, files: &nodeFiles{dir: s.Dir, oldPlans: hasOldPlans(s.Dir)}}
	if !all {
		return filepath.Join(s.Dir, reportFile), out.writeReport(out.reportParams(end.StoppedBy, end.Notes))
	}
	return filepath.Join(s.Dir, reportFile), out.write(ctx, end.StoppedBy, end.Notes)
}

// outputs writes the outputs of a run from its tree and its nodes' files.
type outputs struct {
	s     *session.Session
	tree  *search.Tree
	files *nodeFiles
}

func (o outputs) maximize() bool { return o.s.Spec.Metric.Direction == "maximize" }

// write writes tree.json, report.md, tree.html and, with a memory, its
// export (the best node's branch).
func (o outputs) write(ctx context.Context, stoppedBy string, notes map[int]string) error {
	if err := search.WriteTreeJSON(filepath.Join(o.s.Dir, treeJSONFile), o.tree, o.maximize()); err != nil {
		return err
	}
	rp := o.reportParams(stoppedBy, notes)
	if err := o.writeReport(rp); err != nil {
		return err
	}
	var html strings.Builder
	if err := search.WriteTreeHTML(&html, o.tree, rp); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.s.Dir, treeHTMLFile), []byte(html.String()), 0o644); err != nil {
		return err
	}
	if o.s.Memory != nil && run.On(o.s.Spec.Memory.FinalMemoryEnabled) {
		best := RootBranch
		if b, ok := o.tree.Best(o.maximize()); ok {
			best = b.ID
		}
		md, js := o.s.Spec.Memory.ExportNames()
		if _, err := o.s.Memory.Export(ctx, memory.ExportParams{Root: RootBranch, Best: best, Dir: filepath.Join(o.s.Dir, memoryDir), Markdown: md, JSON: js}); err != nil {
			o.s.Log.Warn("memory export failed", "err", err)
		}
	}
	return nil
}

// reportParams are what report.md and tree.html say beside the tree: the
// usage so far, how the search stopped, the best node's detail, the paper.
func (o outputs) reportParams(stoppedBy string, notes map[int]string) search.ReportParams {
	u := o.s.Client.Usage()
	rp := search.ReportParams{Title: title(o.s.Spec), MetricName: o.s.Spec.Metric.Name, Unit: o.s.Spec.Metric.Unit, Maximize: o.maximize(),
		Calls: u.Calls, TokensIn: u.TokensIn, TokensOut: u.TokensOut, CostUSD: u.CostUSD, LLMCaveats: u.Caveats(), StoppedBy: stoppedBy, StageNotes: notes,
		Paper: paperSection(o.s.Dir), HeldOut: heldOutSection(o.s.Dir, o.s.Spec.Metric.Name, o.s.Spec.Metric.Unit)}
	if best, ok := o.tree.Best(o.maximize()); ok {
		rp.BestDetail = o.bestDetail(best.ID)
	}
	return rp
}

// writeReport writes report.md.
func (o outputs) writeReport(rp search.ReportParams) error {
	var rep strings.Builder
	if err := search.WriteReport(&rep, o.tree, rp); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(o.s.Dir, reportFile), []byte(rep.String()), 0o644)
}
