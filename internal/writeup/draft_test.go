package writeup

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/executor"
	"github.com/hpcq/hpcq/internal/prompt"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

var draftFacts = []rundir.Fact{
	{ID: "best", Claim: "the best GFLOP/s", Value: 842.64, Unit: "GFLOP/s", Node: "n0002", SQL: "SELECT 842.64"},
	{ID: "nodes", Claim: "nodes", Value: 4, SQL: "SELECT 4"},
}

const draftBib = "@article{williams2009roofline,\n  title={Roofline: an insightful {visual} performance model},\n  year={2009}\n}\n"

// paperTeX is a paper around body.
func paperTeX(body string) string {
	return "```latex\n\\documentclass{article}\n\\usepackage{graphicx}\n\\begin{document}\n\\title{Stencil}\\author{hpcq}\\maketitle\n" + body +
		"\n\\bibliographystyle{plain}\n\\bibliography{refs}\n\\end{document}\n```"
}

// scripted answers each purpose with its replies in turn (the last again),
// and keeps the requests.
type scripted struct {
	replies map[prompt.Kind][]string
	asked   map[prompt.Kind][][]llm.Message
	fail    map[prompt.Kind]int // the n-th ask of the purpose fails
}

func (s *scripted) ask(_ context.Context, purpose prompt.Kind, msgs []llm.Message, _ string, parse func(string) error) error {
	if s.asked == nil {
		s.asked = map[prompt.Kind][][]llm.Message{}
	}
	s.asked[purpose] = append(s.asked[purpose], msgs)
	n := len(s.asked[purpose])
	if s.fail[purpose] == n {
		return errors.New("llm: budget: max_cost_usd 2 spent")
	}
	r := s.replies[purpose]
	return parse(r[min(n, len(r))-1])
}

func testPNG(t *testing.T) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 40, 30))
	for x := range 40 {
		img.Set(x, 15, color.Black)
	}
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, img))
	return b.Bytes()
}

func testCompiler(t *testing.T) Compiler {
	testutil.RequireBinary(t, "latexmk", "scripts/services.sh install tex")
	e, err := executor.NewExecutor(executor.Config{RunsDir: t.TempDir()})
	require.NoError(t, err)
	return Compiler{RunID: "r1", Dir: t.TempDir(), Run: func(ctx context.Context, task *schema.NodeTask) (*schema.NodeResult, string, error) {
		res, err := e.Execute(ctx, task, worker.Slot{Cores: 1})
		return res, e.WorkspaceDir(task), err
	}}
}

// TestWrite: a draft with an invented number and an invented citation is
// compiled, the citation removed, both fed back; the next draft is clean;
// its rendered page goes to the reviewer as an image and the findings into
// one revision, which includes the run's figure (a binary file in the
// sandbox's workspace).
func TestWrite(t *testing.T) {
	c := testCompiler(t)
	s := &scripted{replies: map[prompt.Kind][]string{
		prompt.Writeup: {
			paperTeX(`The best reached \fact{best} GFLOP/s, and 41.0 without tiling, as \cite{williams2009roofline,invented2024} and~\cite{invented2024} say.`),
			paperTeX(`Built with gcc 12.2.0, the best of \fact{nodes} nodes reached \fact{best} GFLOP/s, as a roofline \cite{williams2009roofline} predicts.`),
			paperTeX(`The best of \fact{nodes} nodes reached \fact{best} GFLOP/s, as a roofline \cite{williams2009roofline} predicts.` +
				"\n\\begin{figure}\\includegraphics[width=\\linewidth]{figures/n0002-scaling.png}\\caption{GFLOP/s of node n0002 by grid size.}\\end{figure}"),
		},
		prompt.WriteupReview: {"```json\n{\"findings\": [\"The run's plot is not shown: include figures/n0002-scaling.png with a caption.\"]}\n```"},
	}}
	p, err := Write(context.Background(), Drafting{Idea: "A fast stencil.", Facts: draftFacts, Bib: draftBib, Notes: "drafts were slow",
		Setup:   "- worker w1 on host h1: gcc 12.2.0\n",
		Figures: []Figure{{Path: rundir.FiguresDir + "/n0002-scaling.png", Node: "n0002", About: "GFLOP/s by grid size", Data: testPNG(t)}},
		Ask:     s.ask, Compile: c.Compile, Review: true})
	require.NoError(t, err)
	require.Len(t, p.Rounds, 3)
	require.Equal(t, 1, p.Rounds[0].Unverified)
	require.Equal(t, []string{"invented2024"}, p.Rounds[0].Removed)
	require.True(t, p.Rounds[0].Compiled, "a removed citation leaves a paper that compiles")
	require.Equal(t, "revision", p.Rounds[2].Purpose)
	require.Equal(t, []string{"invented2024"}, p.Removed)
	require.Equal(t, []string{"williams2009roofline"}, p.Cited)
	require.Zero(t, p.Report.Unverified)
	require.Equal(t, []string{"nodes", "best"}, p.Report.FactsCited)
	require.Equal(t, "n0002", p.Report.Stated[1].Node)
	require.Contains(t, p.TeX, rundir.FiguresDir+"/n0002-scaling.png")
	require.NotContains(t, p.TeX, "Unverified numbers")
	require.Empty(t, p.Stopped)

	first := s.asked[prompt.Writeup][0][1].Content
	require.Contains(t, first, "- `best` = 842.6 GFLOP/s: the best GFLOP/s")
	require.Contains(t, first, "- `williams2009roofline`: Roofline: an insightful {visual} performance model")
	require.Contains(t, first, "- `figures/n0002-scaling.png` (node n0002): GFLOP/s by grid size")
	require.Contains(t, first, "# Notes\n\ndrafts were slow")
	require.Contains(t, first, "# Setup\n\n- worker w1 on host h1: gcc 12.2.0")
	require.Zero(t, p.Rounds[1].Unverified, "a version the setup records is written as it is")
	require.Equal(t, 1, p.Rounds[1].Numbers)
	second := s.asked[prompt.Writeup][1][1].Content
	require.Contains(t, second, "- 41.0 in \"")
	require.Contains(t, second, "Citations removed, not in the Bibliography section: invented2024")
	require.Contains(t, second, `\cite{williams2009roofline}`, "the previous draft, its citation mended")
	require.NotContains(t, second, "invented2024}")
	review := s.asked[prompt.WriteupReview][0][1]
	require.Len(t, review.Images, 1, "the one page, as an image")
	require.True(t, bytes.HasPrefix(review.Images[0].Data, []byte("\x89PNG")))
	require.Contains(t, s.asked[prompt.Writeup][2][1].Content, "A reader of the rendered pages asks for these changes:\n- The run's plot is not shown")

	pdf, err := os.ReadFile(p.Compiled.PDF)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(pdf, []byte("%PDF-")))
	require.NotEmpty(t, p.Compiled.Pages)
}

// TestWriteLeavesAWarning: a model that keeps an invented number through
// every round gets a paper that says so on its first page; an endpoint
// that stops answering ends the rounds with the last paper that compiled.
func TestWriteLeavesAWarning(t *testing.T) {
	c := testCompiler(t)
	s := &scripted{replies: map[prompt.Kind][]string{prompt.Writeup: {paperTeX(`It reached \fact{best} GFLOP/s, 5.5 times the baseline.`)}}}
	p, err := Write(context.Background(), Drafting{Facts: draftFacts, Bib: draftBib, Ask: s.ask, Compile: c.Compile, MaxRounds: 2})
	require.NoError(t, err)
	require.Len(t, p.Rounds, 2)
	require.Equal(t, 1, p.Report.Unverified)
	i, j := strings.Index(p.TeX, `\maketitle`), strings.Index(p.TeX, "Unverified numbers")
	require.True(t, i >= 0 && j > i, "the note follows the title:\n%s", p.TeX)
	require.Equal(t, 1, CheckPaper(p.TeX, nil, draftFacts, nil).Numbers, "the note states no number")
	require.Contains(t, p.TeX, `\input{facts.tex}`, "the macros are loaded for a paper that forgot them")

	s = &scripted{replies: s.replies, fail: map[prompt.Kind]int{prompt.Writeup: 2}}
	p, err = Write(context.Background(), Drafting{Facts: draftFacts, Bib: draftBib, Ask: s.ask, Compile: c.Compile})
	require.NoError(t, err)
	require.Len(t, p.Rounds, 1)
	require.Contains(t, p.Stopped, "budget")
	require.NotEmpty(t, p.Compiled.PDF)

	s = &scripted{replies: s.replies, fail: map[prompt.Kind]int{prompt.Writeup: 1}}
	_, err = Write(context.Background(), Drafting{Facts: draftFacts, Ask: s.ask, Compile: c.Compile})
	require.ErrorContains(t, err, "budget")
}

// TestWriteKeepsTheBetterPaper: a review's revision that states an
// invented number is not the paper: the reviewed one is, and paper.pdf is
// compiled from it again.
func TestWriteKeepsTheBetterPaper(t *testing.T) {
	c := testCompiler(t)
	testutil.RequireBinary(t, "pdftotext", "scripts/services.sh install tex")
	s := &scripted{replies: map[prompt.Kind][]string{
		prompt.Writeup:       {paperTeX(`Reviewed: the best reached \fact{best} GFLOP/s.`), paperTeX(`Revised: the best reached \fact{best} GFLOP/s, 5.5 times the baseline.`)},
		prompt.WriteupReview: {`{"findings": ["Compare the best with the baseline."]}`},
	}}
	p, err := Write(context.Background(), Drafting{Facts: draftFacts, Bib: draftBib, Ask: s.ask, Compile: c.Compile, Review: true})
	require.NoError(t, err)
	require.Len(t, p.Rounds, 2)
	require.Equal(t, 1, p.Rounds[1].Unverified)
	require.Contains(t, p.TeX, "Reviewed:")
	require.Zero(t, p.Report.Unverified)
	out, err := exec.Command("pdftotext", p.Compiled.PDF, "-").Output()
	require.NoError(t, err)
	require.Contains(t, string(out), "Reviewed:")
	require.NotContains(t, string(out), "Revised:", "the PDF is the paper's, not the last compiled draft's")
}

// TestWriteReviewsThePaper: the pages the reviewer sees are the paper's
// (the draft with the fewest unverified numbers), compiled again when a
// later, worse draft's are in the paper's directory.
func TestWriteReviewsThePaper(t *testing.T) {
	c := testCompiler(t)
	var lastTeX, reviewedTeX string
	compile := func(ctx context.Context, round int, files []schema.File) (Compiled, error) {
		lastTeX = files[0].Content // paper.tex sorts first of these
		return c.Compile(ctx, round, files)
	}
	s := &scripted{replies: map[prompt.Kind][]string{
		prompt.Writeup:       {paperTeX(`Kept: the best reached \fact{best} GFLOP/s \cite{invented2024}.`), paperTeX(`Worse: the best reached 9.9 GFLOP/s.`)},
		prompt.WriteupReview: {`{"findings": []}`},
	}}
	ask := func(ctx context.Context, purpose prompt.Kind, msgs []llm.Message, shape string, parse func(string) error) error {
		if purpose == prompt.WriteupReview {
			reviewedTeX = lastTeX
		}
		return s.ask(ctx, purpose, msgs, shape, parse)
	}
	p, err := Write(context.Background(), Drafting{Facts: draftFacts, Bib: draftBib, Ask: ask, Compile: compile, Review: true, MaxRounds: 2})
	require.NoError(t, err)
	require.Len(t, p.Rounds, 2)
	require.Contains(t, reviewedTeX, "Kept:")
	require.Contains(t, p.TeX, "Kept:")
	require.Zero(t, p.Report.Unverified)
}

// TestWriteCompileErrors: a paper that does not compile is fed back with
// the error's line; a model that never mends it leaves the last draft,
// uncompiled.
func TestWriteCompileErrors(t *testing.T) {
	c := testCompiler(t)
	s := &scripted{replies: map[prompt.Kind][]string{prompt.Writeup: {paperTeX(`It reached \fact{bets} GFLOP/s \undefinedmacro.`)}}}
	p, err := Write(context.Background(), Drafting{Facts: draftFacts, Ask: s.ask, Compile: c.Compile, MaxRounds: 2, Review: true})
	require.NoError(t, err)
	require.Len(t, p.Rounds, 2)
	require.False(t, p.Rounds[1].Compiled)
	require.Equal(t, []string{"bets"}, p.Report.UnknownFacts)
	require.Empty(t, p.Compiled.PDF)
	fb := s.asked[prompt.Writeup][1][1].Content
	require.Contains(t, fb, "Fact ids that are not in the Facts section (the paper cannot compile with them): bets")
	require.Contains(t, fb, "The paper did not compile:")
	require.Contains(t, fb, "no fact bets in facts.json")
	require.Empty(t, s.asked[prompt.WriteupReview], "nothing compiled: nothing to review")
}

func TestRemoveCitations(t *testing.T) {
	tex := `A~\cite{a,x} b \citep[p.~3]{x} c~\cite{x}. % \cite{x}`
	require.Equal(t, `A~\cite{a} b c. %`, RemoveCitations(tex, []string{"x"}))
	require.Equal(t, tex, RemoveCitations(tex, nil))
}

func TestBibEntries(t *testing.T) {
	bib := "@article{a, title = {Nested {B}races\n  over lines}, year=2009}\n@misc{b, title=\"Quoted\"}\n@book{c, author={x}}\n"
	require.Equal(t, []bibEntry{{"a", "Nested {B}races over lines"}, {"b", "Quoted"}, {"c", ""}}, bibEntries(bib))
}

// TestCompileBounds: a paper that loops to 40 pages renders its first
// MaxPages; an SVG plot is included as the PDF the compile makes of it.
func TestCompileBounds(t *testing.T) {
	c := testCompiler(t)
	tex := "\\documentclass{article}\\usepackage{graphicx}\\begin{document}\\includegraphics{figures/best-x.pdf}\\newcount\\n" +
		"\\loop x\\newpage\\advance\\n by 1 \\ifnum\\n<40 \\repeat\\end{document}\n"
	svg := `<svg xmlns="http://www.w3.org/2000/svg" width="60" height="40"><rect width="60" height="40" fill="blue"/></svg>`
	got, err := c.Compile(context.Background(), 1, []schema.File{{Path: rundir.PaperTeX, Content: tex}, {Path: rundir.FiguresDir + "/best-x.svg", Content: svg}})
	require.NoError(t, err)
	require.Empty(t, got.Error)
	require.Len(t, got.Pages, MaxPages)
	require.Equal(t, rundir.PagePrefix+"-01.png", filepath.Base(got.Pages[0]), "pdftoppm pads the number to the page count's digits")
}

// TestCompileIsSandboxed: the LaTeX is the model's code: a paper that
// writes a file outside its workspace (\openout) or runs a command
// (\write18) leaves nothing outside it.
func TestCompileIsSandboxed(t *testing.T) {
	c := testCompiler(t)
	dir, err := os.MkdirTemp("", "hpcq-escape-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o777))
	tex := "\\documentclass{article}\\newwrite\\f\\immediate\\openout\\f=" + dir + "/opened.txt\\immediate\\write\\f{x}\\immediate\\closeout\\f\n" +
		"\\immediate\\write18{touch " + dir + "/shell.txt}\\begin{document}x\\end{document}\n"
	_, err = c.Compile(context.Background(), 1, []schema.File{{Path: rundir.PaperTeX, Content: tex}})
	require.NoError(t, err)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing written outside the workspace")
}

// FuzzRemoveCitations: whatever a model writes, the keys dropped are in no
// \cite of the result, and nothing else grows.
func FuzzRemoveCitations(f *testing.F) {
	f.Add(`A~\cite{a,x} b \citep[p.~3]{x} c~\cite{x}.`, "x")
	f.Add(`\cite{x`, "x")
	f.Add(`\nocite*{x, y ,x}`, "y")
	f.Add("\\let\\my\\cite \\my{x} \\begin{thebibliography}{9}\\bibitem{x} X.\\bibitem[Y]{y} Y.\\end{thebibliography}", "x")
	f.Add(`\newcommand{\r}[1]{\citep{#1}} \r{x,y}`, "x")
	f.Fuzz(func(t *testing.T, tex, key string) {
		key = strings.TrimSpace(key)
		if key == "" || strings.ContainsAny(key, ",}") {
			return
		}
		out := RemoveCitations(tex, []string{key})
		require.LessOrEqual(t, len(out), len(tex))
		keys, _ := Citations(out, "")
		require.NotContains(t, keys, key)
	})
}

// TestCompileReadsNothingOfTheHost: a paper that reads a host file
// (\openin, \input of /etc/passwd), the compile's environment
// (/proc/self/environ, holding a token of the caller's) or runs a command
// (\write18, restricted or not) gets nothing of them: not into the PDF,
// not into the error fed back to the model.
func TestCompileReadsNothingOfTheHost(t *testing.T) {
	t.Setenv("HF_TOKEN", "hf_hpcq_secret_token")
	c := testCompiler(t)
	pdfText := func(path string) string {
		out, err := exec.Command("pdftotext", path, "-").Output()
		require.NoError(t, err)
		return string(out)
	}
	read := `\documentclass{article}\begin{document}
\newread\r \openin\r=/etc/passwd \ifeof\r PASSWD-UNREAD\else\read\r to\x PASSWD:\x\fi
\openin\r=/proc/self/environ \ifeof\r ENV-UNREAD\else\read\r to\x ENV:\x\fi
SHELL-ESCAPE=\the\pdfshellescape.
\immediate\write18{kpsewhich article.cls}
\end{document}
`
	got, err := c.Compile(context.Background(), 1, []schema.File{{Path: rundir.PaperTeX, Content: read}})
	require.NoError(t, err)
	require.Empty(t, got.Error)
	text := pdfText(got.PDF)
	require.Contains(t, text, "PASSWD-UNREAD")
	require.Contains(t, text, "ENV-UNREAD")
	require.Contains(t, text, "SHELL-ESCAPE=0", "no shell escape, not even the restricted one")
	require.NotContains(t, text, "root:")
	require.NotContains(t, text, "hf_hpcq_secret_token")

	for _, file := range []string{"/etc/passwd", "/proc/self/environ", "../../../../etc/passwd"} {
		tex := `\documentclass{article}\begin{document}\catcode` + "`" + `\#=12 \input{` + file + `}\end{document}` + "\n"
		got, err := c.Compile(context.Background(), 2, []schema.File{{Path: rundir.PaperTeX, Content: tex}})
		require.NoError(t, err, file)
		require.NotEmpty(t, got.Error, "%s: not found, the compile fails", file)
		require.Contains(t, got.Error, "not found", file)
		require.NotContains(t, got.Error, "root:x:0", file)
		require.NotContains(t, got.Error, "hf_hpcq_secret_token", file)
	}
}

// TestTeXMessages: a failed compile's log gives back TeX's own messages
// only: the error, where it stopped, latexmk's summary; not what TeX
// echoed of the files it read.
func TestTeXMessages(t *testing.T) {
	log := `This is pdfTeX, Version 3.141592653-2.6-1.40.24
(./paper.tex
LaTeX2e <2022-11-01>
root:x:0:0:root:/root:/bin/bash
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin
./paper.tex:6: Undefined control sequence.
l.6 \foo
        {bar}
! Emergency stop.
Latexmk: Errors, so I did not complete making targets
`
	got := texMessages(log)
	require.Contains(t, got, "./paper.tex:6: Undefined control sequence.")
	require.Contains(t, got, "l.6 \\foo\n        {bar}")
	require.Contains(t, got, "! Emergency stop.")
	require.Contains(t, got, "Latexmk: Errors")
	require.NotContains(t, got, "root:x")
	require.NotContains(t, got, "pdfTeX, Version")
	require.Equal(t, "(the compile's output holds no message of TeX's)", texMessages("root:x:0:0\n"))
	long := strings.Repeat("! Undefined control sequence é.\n", 500)
	require.LessOrEqual(t, len(texMessages(long)), maxTeXMessages)
	require.True(t, utf8.ValidString(texMessages(long)))
}
