package writeup

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hpcq/hpcq/internal/prompt"
	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// Drafting is what the model writes a paper from, and how its drafts are
// asked for and compiled.
type Drafting struct {
	Idea  string
	Facts []rundir.Fact
	// Notes is the run's final memory export.
	Notes string
	// Path is the path from the root to the best node: each node's kind,
	// what it tried, how it ended.
	Path string
	// Setup says what the nodes ran with (toolchains and their versions,
	// hosts), from their results: the versions in it may be written as
	// they are.
	Setup string
	// Bib is the bibliography the run was given (the idea's refs.bib).
	Bib     string
	Figures []Figure
	// Ask asks the model (purpose prompt.Writeup or WriteupReview) until
	// parse accepts a reply's payload; an error ends the writeup (the
	// budget is spent, the endpoint refuses).
	Ask func(ctx context.Context, purpose prompt.Kind, msgs []llm.Message, shape string, parse func(string) error) error
	// Compile compiles a round's files (paper.tex, facts.tex, refs.bib, the
	// figures) where the model's code runs; a paper that does not compile
	// is Compiled.Error, an error is the machinery's. Nil: no TeX here; the
	// drafts are checked, not compiled.
	Compile func(ctx context.Context, round int, files []schema.File) (Compiled, error)
	// SVG: the compile turns SVG plots into PDF (rsvg-convert is
	// installed); without it they are left out of the figures.
	SVG bool
	// Review: the model reads images; the rendered pages are reviewed
	// once and the findings fed into one revision round.
	Review bool
	// MaxRounds bounds the drafts before the review [3].
	MaxRounds int
}

// A Figure is a plot a paper may include: its path beside paper.tex, the
// node it comes from, what is known of it, and its bytes.
type Figure struct {
	Path  string
	Node  string
	About string
	Data  []byte
}

// Include is the path the paper includes: an SVG's is the PDF the compile
// makes of it.
func (f Figure) Include() string {
	if strings.HasSuffix(f.Path, ".svg") {
		return strings.TrimSuffix(f.Path, ".svg") + ".pdf"
	}
	return f.Path
}

// Compiled is what a compile gave: the PDF and its pages' PNGs brought
// home, or why the paper did not compile (the log's tail).
type Compiled struct {
	PDF   string
	Pages []string
	Error string
}

// Paper is a writeup's outcome: the last paper that compiled (else the
// last draft), its check, and how the rounds went.
type Paper struct {
	TeX      string
	Report   rundir.Report
	Compiled Compiled
	// Cited are the keys the paper cites; Removed those taken out of the
	// drafts (not in the bibliography).
	Cited   []string
	Removed []string
	Rounds  []rundir.Round
	// Figures are those the drafts were given (beside paper.tex).
	Figures []Figure
	// Stopped says why the rounds ended before the paper was clean (the
	// budget, an endpoint's refusal).
	Stopped string
}

// Claims is what claims.json says of the paper.
func (p Paper) Claims() rundir.Claims {
	c := rundir.Claims{Report: p.Report, Citations: p.Cited, CitationsRemoved: p.Removed, Rounds: p.Rounds, Stopped: p.Stopped, Pages: len(p.Compiled.Pages)}
	if p.Compiled.PDF != "" {
		c.PDF = filepath.Base(p.Compiled.PDF)
	}
	return c
}

// draft is one round's paper, checked and compiled.
type draft struct {
	tex      string
	report   rundir.Report
	cited    []string
	removed  []string
	compiled Compiled
}

func (d draft) clean() bool {
	return d.compiled.Error == "" && d.report.Unverified == 0 && len(d.report.UnknownFacts) == 0 && len(d.removed) == 0 &&
		len(d.report.InsideNoise) == 0
}

// Write has the model write the paper: a draft, checked (numbers, fact ids,
// citations) and compiled, then the feedback of what was wrong for the
// next draft, until one is clean or MaxRounds drafts were written; then,
// with Review, the rendered pages read by the vision model and its
// findings fed into one revision, kept only when it compiles and states
// no more unverified numbers. The paper is the draft that compiled with the
// fewest unverified numbers (the later of equals), its PDF compiled again
// when another's is in the paper's directory; one left with an unverified
// number says so on its first page. An error of Ask ends the rounds there,
// with Stopped saying why; before any draft, it is the error.
//
// Long: the rounds, the review and the final warning, in order.
func Write(ctx context.Context, d Drafting) (Paper, error) {
	maxRounds := d.MaxRounds
	if maxRounds <= 0 {
		maxRounds = 3
	}
	p := Paper{Figures: d.Figures}
	// last is the last draft; best the compiled one with the fewest
	// unverified numbers (the later of equals); pdf the one whose PDF and
	// pages are in the paper's directory (a failed compile leaves them).
	var last, best, pdf *draft
	removed := map[string]bool{}
	keep := func(r draft, purpose string, findings []string) {
		last = &r
		if r.compiled.Error == "" {
			pdf = &r
			if best == nil || r.report.Unverified+len(r.report.UnknownFacts) <= best.report.Unverified+len(best.report.UnknownFacts) {
				best = &r // a review's revision that is worse leaves the reviewed paper
			}
		}
		for _, k := range r.removed {
			removed[k] = true
		}
		p.Rounds = append(p.Rounds, rundir.Round{Round: len(p.Rounds) + 1, Purpose: purpose, Numbers: r.report.Numbers, Unverified: r.report.Unverified,
			Unknown: r.report.UnknownFacts, Removed: r.removed, Compiled: r.compiled.Error == "", Error: r.compiled.Error, Findings: findings, TeX: r.tex})
	}
	feedback := ""
	for n := 1; n <= maxRounds; n++ {
		prev := ""
		if last != nil {
			prev = last.tex
		}
		tex, err := d.ask(ctx, prev, feedback)
		if err != nil {
			if best == nil && last == nil {
				return p, err
			}
			p.Stopped = err.Error()
			break
		}
		r, err := d.assess(ctx, len(p.Rounds)+1, tex)
		if err != nil {
			return p, err
		}
		keep(r, string(prompt.Writeup), nil)
		if r.clean() {
			break
		}
		feedback = d.feedback(r)
	}
	if d.Review && best != nil && best != pdf && p.Stopped == "" {
		// The pages in the paper's directory are a later, worse draft's.
		c, err := d.Compile(ctx, len(p.Rounds)+1, d.files(best.tex))
		if err != nil {
			return p, err
		}
		if c.Error == "" {
			best.compiled, pdf = c, best
		}
	}
	if d.Review && best != nil && best == pdf && p.Stopped == "" {
		findings, err := d.review(ctx, *best)
		switch {
		case err != nil:
			p.Stopped = err.Error()
		case len(findings) > 0:
			fb := "A reader of the rendered pages asks for these changes:\n- " + strings.Join(findings, "\n- ") +
				"\nKeep every number stated through its fact."
			tex, err := d.ask(ctx, best.tex, fb)
			if err != nil {
				p.Stopped = err.Error()
				break
			}
			r, err := d.assess(ctx, len(p.Rounds)+1, tex)
			if err != nil {
				return p, err
			}
			keep(r, "revision", findings)
		}
	}
	final := best
	if final == nil {
		final = last
	}
	if err := d.finish(ctx, len(p.Rounds)+1, final, pdf); err != nil {
		return p, err
	}
	p.TeX, p.Report, p.Compiled, p.Cited = final.tex, final.report, final.compiled, final.cited
	for k := range removed {
		p.Removed = append(p.Removed, k)
	}
	sort.Strings(p.Removed)
	return p, nil
}

// finish makes the final draft the paper: with an unverified number, the
// note on its first page; compiled again when that changed it or when
// another draft's PDF is in the paper's directory (pdf). A note that does
// not compile is left out rather than the PDF not being the paper's.
func (d Drafting) finish(ctx context.Context, round int, final, pdf *draft) error {
	tex := final.tex
	if final.report.Unverified > 0 {
		tex = withWarning(tex)
	}
	if d.Compile == nil || final.compiled.Error != "" {
		final.tex = tex
		return nil
	}
	for _, t := range []string{tex, final.tex} {
		if t == final.tex && final == pdf {
			return nil // its PDF is there already
		}
		c, err := d.Compile(ctx, round, d.files(t))
		if err != nil {
			return err
		}
		if c.Error == "" {
			final.tex, final.compiled = t, c
			return nil
		}
	}
	final.compiled = Compiled{Error: "the final paper did not compile again (" + rundir.PaperPDF + " is another draft's)"}
	return nil
}

// ask has the model write a draft, from the previous one and the feedback.
func (d Drafting) ask(ctx context.Context, prev, feedback string) (string, error) {
	msgs, err := prompt.WriteupMessages(prompt.Paper{Idea: d.Idea, Facts: factsText(d.Facts), Path: d.Path, Setup: d.Setup, Figures: d.figuresText(),
		Bibliography: bibText(d.Bib), Notes: d.Notes, Draft: prev, Feedback: feedback})
	if err != nil {
		return "", err
	}
	var tex string
	err = d.Ask(ctx, prompt.Writeup, msgs, "the whole paper in one latex block", func(s string) error {
		var err error
		tex, err = prompt.ParsePaper(s)
		return err
	})
	return tex, err
}

// assess takes the citations the bibliography lacks out of a draft,
// checks its numbers and fact ids, and compiles it.
func (d Drafting) assess(ctx context.Context, round int, tex string) (draft, error) {
	r := draft{tex: withFacts(tex)}
	var unknown []string
	if r.cited, unknown = Citations(r.tex, d.Bib); len(unknown) > 0 {
		r.tex, r.removed = RemoveCitations(r.tex, unknown), unknown
		r.cited, _ = Citations(r.tex, d.Bib)
	}
	r.report = CheckPaper(r.tex, nil, d.Facts, GivenIn(d.Setup, d.Idea))
	if d.Compile == nil {
		return r, nil
	}
	var err error
	r.compiled, err = d.Compile(ctx, round, d.files(r.tex))
	return r, err
}

// maxClaimsFed bounds the unverified numbers one feedback lists.
const maxClaimsFed = 20

// feedback says what a draft must fix: its unverified numbers (where they
// are), unknown fact ids, removed citations, the compile's error.
func (d Drafting) feedback(r draft) string {
	var b strings.Builder
	n := 0
	for _, c := range r.report.Claims {
		if c.Verified() {
			continue
		}
		if n++; n == 1 {
			b.WriteString("Numbers no fact states (write each through \\fact{id} or \\factpct{id}, or take it out):\n")
		}
		if n <= maxClaimsFed {
			fmt.Fprintf(&b, "- %s in %q\n", c.Shown(), c.Context)
		}
	}
	if n > maxClaimsFed {
		fmt.Fprintf(&b, "- and %d more\n", n-maxClaimsFed)
	}
	if len(r.report.InsideNoise) > 0 {
		b.WriteString("Differences inside the noise (the two nodes' 95% intervals overlap): say in the same sentence that they are within the noise, or take them out:\n")
		for _, x := range r.report.InsideNoise {
			fmt.Fprintf(&b, "- %s\n", x)
		}
	}
	if len(r.report.UnknownFacts) > 0 {
		fmt.Fprintf(&b, "Fact ids that are not in the Facts section (the paper cannot compile with them): %s\n", strings.Join(r.report.UnknownFacts, ", "))
	}
	if len(r.removed) > 0 {
		fmt.Fprintf(&b, "Citations removed, not in the Bibliography section: %s. Mend the sentences they were in.\n", strings.Join(r.removed, ", "))
	}
	if r.compiled.Error != "" {
		b.WriteString("The paper did not compile:\n```\n" + r.compiled.Error + "\n```\n")
	}
	return strings.TrimSpace(b.String())
}

// review shows the compiled paper's pages to the vision model.
func (d Drafting) review(ctx context.Context, r draft) ([]string, error) {
	var pages []llm.Image
	for _, p := range r.compiled.Pages {
		if len(pages) == llm.MaxImages {
			break
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		if len(data) <= llm.MaxImageBytes {
			pages = append(pages, llm.Image{MIME: "image/png", Data: data})
		}
	}
	if len(pages) == 0 {
		return nil, nil
	}
	msgs, err := prompt.WriteupReviewMessages(r.tex, pages)
	if err != nil {
		return nil, err
	}
	var findings []string
	err = d.Ask(ctx, prompt.WriteupReview, msgs, `one JSON object {"findings": [...]}`, func(s string) error {
		var err error
		findings, err = prompt.ParsePageReview(s)
		return err
	})
	return findings, err
}

// files are a round's workspace: the paper, the macros of the facts, the
// bibliography and the figures.
func (d Drafting) files(tex string) []schema.File {
	fs := []schema.File{{Path: rundir.PaperTeX, Content: tex}, {Path: rundir.FactsTeX, Content: Macros(d.Facts)}}
	if strings.TrimSpace(d.Bib) != "" {
		fs = append(fs, schema.File{Path: rundir.RefsBib, Content: d.Bib})
	}
	for _, f := range d.Figures {
		fs = append(fs, schema.File{Path: f.Path, Content: base64.StdEncoding.EncodeToString(f.Data), Encoding: schema.EncodingBase64})
	}
	return fs
}

// factsText lists the facts for the prompt: id, value as \fact prints it,
// unit, what it is, its kind, and whether it is inside the noise.
func factsText(facts []rundir.Fact) string {
	var b strings.Builder
	for _, f := range facts {
		fmt.Fprintf(&b, "- `%s` = %s", f.ID, Format(f.Value))
		if f.Unit != "" {
			b.WriteString(" " + f.Unit)
		}
		b.WriteString(": " + f.Claim)
		if f.Kind != "" {
			b.WriteString(" [" + f.Kind + "]")
		}
		if f.Noise != "" {
			b.WriteString(" (" + f.Noise + ": not a difference the measurements tell apart)")
		}
		b.WriteString("\n")
	}
	return b.String()
}

func (d Drafting) figuresText() string {
	var b strings.Builder
	for _, f := range d.Figures {
		fmt.Fprintf(&b, "- `%s` (node %s): %s\n", f.Include(), f.Node, f.About)
	}
	return b.String()
}

// bibText lists the bibliography's keys with their titles.
func bibText(bib string) string {
	var b strings.Builder
	for _, e := range bibEntries(bib) {
		fmt.Fprintf(&b, "- `%s`: %s\n", e.key, e.title)
	}
	return b.String()
}
