package schedcmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/engine"
	"github.com/hpcq/hpcq/internal/run"
	"github.com/hpcq/hpcq/internal/session"
	"github.com/hpcq/hpcq/internal/term"
	"github.com/hpcq/hpcq/internal/writeup"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// paperRun is a run whose paper is written: its spec, directory and
// facts, the model and where its calls are recorded.
type paperRun struct {
	info  rundir.Info
	facts []rundir.Fact
	// s is the run's session: its spec and directory, the model, where its
	// calls are recorded.
	s *session.Session
}

// texTools are what compiling a paper needs on this machine.
var texTools = []string{"latexmk", "pdflatex", "bibtex", "pdftoppm"}

// missingTeX names the first of texTools not on PATH ("" when all are).
func missingTeX() string {
	for _, t := range texTools {
		if _, err := exec.LookPath(t); err != nil {
			return t
		}
	}
	return ""
}

// writePaper has the model write the run's paper (writeup.WriteRun: DIR/paper
// with paper.tex, the drafts, the figures, claims.json and, where TeX is
// installed, paper.pdf and its pages; report.md's section on it), then
// prints the writeup line. Without TeX the paper is checked, not compiled,
// and the way to install it is said. ok is false when a number is
// unverified or, with TeX, no draft compiled.
func writePaper(ctx context.Context, cfg *config.Scheduler, r paperRun) (ok bool, err error) {
	dir := rundir.Dir(r.s.Dir).Path(rundir.PaperDir)
	d := writeup.Drafting{Facts: r.facts, Bib: runBib(r.s.Spec, r.info), MaxRounds: r.s.Spec.Writeup.MaxRounds}
	noTeX := missingTeX()
	// Without TeX the paper is compiled later (writeup --check --pdf, once
	// TeX and rsvg-convert are installed as the line below says): its SVG
	// plots are offered as the PDFs that compile will make of them.
	d.SVG = noTeX != ""
	if noTeX == "" {
		comp, err := compiler(cfg, r.info.RunID, dir)
		if err != nil {
			return false, err
		}
		d.Compile = comp.Compile
		_, err = exec.LookPath("rsvg-convert")
		d.SVG = err == nil
	}
	paper, used, err := writeup.WriteRun(ctx, r.s, d)
	if err == nil {
		err = engine.WriteReport(ctx, r.s)
	}
	if err != nil {
		return false, fmt.Errorf("writeup: %w", err)
	}
	tex, claims := filepath.Join(dir, rundir.PaperTeX), filepath.Join(dir, rundir.ClaimsFile)
	printUnverified(paper.Report)
	if paper.Stopped != "" {
		fmt.Fprintf(term.Stderr(), "writeup: the rounds stopped early: %s\n", paper.Stopped)
	}
	pdf := paper.Compiled.PDF
	switch {
	case noTeX != "":
		pdf = "none"
		fmt.Printf("writeup: no TeX here (%s is not installed): the paper is %s, not compiled. Install TeX with `scripts/services.sh install tex` "+
			"(Debian: apt-get install texlive-latex-base latexmk poppler-utils librsvg2-bin), then compile it without asking the model again: "+
			"scheduler writeup --run-dir %s --check %s --pdf\n", noTeX, tex, r.s.Dir, tex)
	case pdf == "":
		pdf = "none"
		last := paper.Rounds[len(paper.Rounds)-1]
		fmt.Fprintf(term.Stderr(), "writeup: no draft compiled; the last one's error:\n%s\n", last.Error)
	}
	fmt.Printf("writeup: %d calls, %d tokens in, %d out, %s; paper %s, claims %s\n", used.Calls, used.TokensIn, used.TokensOut, used.Cost(), tex, claims)
	if c := used.Caveats(); c != "" {
		fmt.Printf("writeup: %s\n", c)
	}
	rep := paper.Report
	fmt.Printf("writeup pdf=%s pages=%d numbers=%d verified=%d unverified=%d citations=%d citations_removed=%d rounds=%d\n",
		pdf, len(paper.Compiled.Pages), rep.Numbers, rep.Verified, rep.Unverified, len(paper.Cited), len(paper.Removed), len(paper.Rounds))
	return rep.Unverified == 0 && len(rep.UnknownFacts) == 0 && (pdf != "none" || noTeX != ""), nil
}

// runBib is the bibliography the run was given: refs.bib beside its idea,
// and an entry for each paper of its resources file (class paper).
func runBib(spec run.Spec, info rundir.Info) string {
	var bib []byte
	if info.IdeaDir != "" {
		var err error
		bib, err = os.ReadFile(filepath.Join(info.IdeaDir, rundir.RefsBib))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			slog.Warn("writeup: the idea's "+rundir.RefsBib+" not read", "err", err)
		}
	}
	if spec.Resources == "" {
		return string(bib)
	}
	idx, err := memory.LoadResources(spec.Resources, filepath.Dir(spec.Resources))
	if err != nil {
		slog.Warn("writeup: the resources file not read: its papers are not cited", "err", err)
		return string(bib)
	}
	var refs []writeup.Reference
	for _, it := range idx.Items {
		if strings.EqualFold(it.Class, "paper") {
			refs = append(refs, writeup.Reference{Name: it.Name, URL: it.URL, Path: it.Path, Summary: it.Summary})
		}
	}
	return writeup.ReferencesBib(string(bib), refs)
}

// printUnverified lists a paper's unverified numbers on stderr.
func printUnverified(r rundir.Report) {
	for _, c := range r.UnverifiedClaims() {
		fmt.Fprintf(term.Stderr(), "unverified: %s (in %q)\n", c.Shown(), c.Context)
	}
	for _, x := range r.InsideNoise {
		fmt.Fprintf(term.Stderr(), "inside the noise: %s\n", x)
	}
}
