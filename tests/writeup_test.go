package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/fakellm"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// TestWriteupChecksAPaper: after a search, `scheduler writeup` writes the
// run's facts (each with the SQL that gives it) and the macros that state
// them; a paper that states a number no experiment produced fails the
// check, with the number and where it is; stated through the facts, or as
// their rounded values, it passes.
func TestWriteupChecksAPaper(t *testing.T) {
	t.Parallel()
	runDir, env := scoreRun(t, writeIdea(t, 2, 1))
	out, code := run(t, env, "scheduler", "writeup", "--facts", "--run-dir", runDir)
	require.Equal(t, 0, code, out)
	require.Regexp(t, `writeup facts=\d+ facts_json=\S+facts.json facts_tex=\S+facts.tex`, out)
	data, err := os.ReadFile(filepath.Join(runDir, rundir.PaperDir, rundir.FactsFile))
	require.NoError(t, err)
	var facts []rundir.Fact
	require.NoError(t, json.Unmarshal(data, &facts))
	byID := map[string]rundir.Fact{}
	for _, f := range facts {
		byID[f.ID] = f
	}
	require.Equal(t, 37.5, byID["best"].Value)
	require.Contains(t, byID["best"].SQL, "FROM nodes WHERE run = ")
	require.Equal(t, 1.0, byID["best_over_baseline"].Value, "stage 1's best is the baseline: here the best too")
	tex, err := os.ReadFile(filepath.Join(runDir, rundir.PaperDir, rundir.FactsTeX))
	require.NoError(t, err)
	require.Contains(t, string(tex), `\@namedef{hpcqfact@best}{37.5}`)

	paper := filepath.Join(t.TempDir(), rundir.PaperTeX)
	invented := `\section{Results}The best draft scored \fact{best} points in 2026 (Table~1), against 12.3 for the other; a third reached 41.0.`
	require.NoError(t, os.WriteFile(paper, []byte(invented), 0o644))
	out, code = run(t, env, "scheduler", "writeup", "--run-dir", runDir, "--check", paper)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, `unverified: 41.0 (in "`)
	require.Regexp(t, `writeup check numbers=4 verified=3 unverified=1 facts_cited=1 unknown_facts=0 citations=0 unknown_citations=0 claims=\S+claims.json`, out)
	var report rundir.Report
	data, err = os.ReadFile(filepath.Join(runDir, rundir.PaperDir, rundir.ClaimsFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &report))
	for _, c := range report.Claims {
		if c.Text == "12.3" {
			require.NotEmpty(t, c.FactID, "12.3 is a node's score, rounded")
		}
	}

	require.NoError(t, os.WriteFile(paper, []byte(strings.Replace(invented, "; a third reached 41.0", "", 1)+` \fact{no_such}`), 0o644))
	out, code = run(t, env, "scheduler", "writeup", "--run-dir", runDir, "--check", paper)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, `unknown fact: \fact{no_such}`)
	require.NoError(t, os.WriteFile(paper, []byte(strings.Replace(invented, "; a third reached 41.0", "", 1)), 0o644))
	out, code = run(t, env, "scheduler", "writeup", "--run-dir", runDir, "--check", paper)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "writeup check numbers=3 verified=3 unverified=0")

	// A section the paper inputs is read where it is input, through its
	// macros; a file outside the paper's directory is not read.
	require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(paper), "results.tex"),
		[]byte(`\newcommand{\score}[1]{#1 points}A third reached \score{41.0}.`), 0o644))
	require.NoError(t, os.WriteFile(paper, []byte(strings.Replace(invented, "; a third reached 41.0.", `. \input{results} \input{../x}`, 1)), 0o644))
	out, code = run(t, env, "scheduler", "writeup", "--run-dir", runDir, "--check", paper)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, `unverified: 41.0 (printed by \input) (in "`)
	require.Contains(t, out, "A third reached 41.0 points")
}

// TestWriteupCompilesAPaper: a paper that states the run's facts by id and
// cites the idea's bibliography compiles in a task's sandbox to a PDF whose
// pages are rendered; a citation the bibliography lacks is caught; a paper
// whose LaTeX fails says why.
func TestWriteupCompilesAPaper(t *testing.T) {
	testutil.RequireBinary(t, "latexmk", "scripts/services.sh install tex")
	t.Parallel()
	idea := writeIdea(t, 2, 1)
	require.NoError(t, os.WriteFile(filepath.Join(idea, rundir.RefsBib), []byte("@article{williams2009roofline,\n  author={Samuel Williams and Andrew Waterman and David Patterson},\n"+
		"  title={Roofline: an insightful visual performance model for multicore architectures},\n  journal={Communications of the ACM},\n  year={2009}\n}\n"), 0o644))
	runDir, env := scoreRun(t, idea)

	paper := filepath.Join(t.TempDir(), rundir.PaperTeX)
	body := `\documentclass{article}
\input{facts.tex}
\begin{document}
\title{Scores}\author{hpcq}\maketitle
\section{Results}
The best of \fact{nodes} drafts scored \fact{best} points, \factpct{best_gain} above the baseline, as a roofline \cite{CITE} would not predict.
\bibliographystyle{plain}
\bibliography{refs}
\end{document}
`
	write := func(cite string) {
		require.NoError(t, os.WriteFile(paper, []byte(strings.ReplaceAll(body, "CITE", cite)), 0o644))
	}
	write("williams2009roofline")
	out, code := run(t, env, "scheduler", "writeup", "--run-dir", runDir, "--check", paper, "--pdf")
	require.Equal(t, 0, code, out)
	require.Regexp(t, `writeup check pdf=\S+paper.pdf pages=1 numbers=0 verified=0 unverified=0 facts_cited=3 unknown_facts=0 citations=1 unknown_citations=0`, out)
	pdf, err := os.ReadFile(filepath.Join(runDir, rundir.PaperDir, rundir.PaperPDF))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(pdf), "%PDF-"))
	pngs, _ := filepath.Glob(filepath.Join(runDir, rundir.PaperDir, rundir.PagesDir, rundir.PagePrefix+"-*.png"))
	require.Len(t, pngs, 1)
	var claims rundir.Claims
	data, err := os.ReadFile(filepath.Join(runDir, rundir.PaperDir, rundir.ClaimsFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &claims))
	require.Equal(t, rundir.PaperPDF, claims.PDF, "the report and dashboard link the PDF the check compiled")
	require.Equal(t, 1, claims.Pages)

	write("invented2024")
	out, code = run(t, env, "scheduler", "writeup", "--run-dir", runDir, "--check", paper)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "unknown citation: invented2024 (not in the idea's refs.bib)")

	require.NoError(t, os.WriteFile(paper, []byte(strings.Replace(strings.ReplaceAll(body, "CITE", "williams2009roofline"), `\fact{best}`, `\fact{bets}`, 1)), 0o644))
	out, code = run(t, env, "scheduler", "writeup", "--run-dir", runDir, "--check", paper, "--pdf")
	require.NotEqual(t, 0, code, out)
	require.Contains(t, out, "the paper did not compile")
	require.Contains(t, out, "no fact bets in facts.json")
}

// scoreIdea is writeIdea's idea of two drafts with run.yaml's llm line
// replaced.
func scoreIdea(t *testing.T, llm string) string {
	t.Helper()
	idea := writeIdea(t, 2, 1)
	spec, err := os.ReadFile(filepath.Join(idea, "run.yaml"))
	require.NoError(t, err)
	spec = []byte(strings.Replace(string(spec), "llm: {model: test-model}", llm, 1))
	require.NoError(t, os.WriteFile(filepath.Join(idea, "run.yaml"), spec, 0o644))
	return idea
}

// scoreRun runs a search of the idea whose two drafts print a score (12.25
// and 37.5 points) against the fake endpoint; its directory and the
// environment that ran it.
func scoreRun(t *testing.T, idea string) (string, []string) {
	t.Helper()
	srv := draftsLLM(t, func(n int) string {
		return runScript("echo 'METRIC score=" + []string{"0", "12.25", "37.5"}[n] + " points'\n")
	})
	runDir := filepath.Join(t.TempDir(), "run")
	env := baseEnv(t, "OPENAI_BASE_URL="+srv.BaseURL(), "OPENAI_API_KEY=test-key")
	out, code := run(t, env, "scheduler", "run", "--local", "--run-dir", runDir, idea)
	require.Equal(t, 0, code, out)
	return runDir, env
}

// TestWriteupWritesThePaper: `scheduler writeup` has the model write the
// run's paper: a draft with an invented number and an invented citation is
// compiled, the citation removed, both fed back, and the next draft states
// its numbers through the facts; the rendered page reaches the vision model
// as an image, its finding goes into one revision; the paper's every number
// is in claims.json with its node and query, the calls are llm_calls rows.
// Without TeX the paper is checked, not compiled, and the way to install
// it is said.
func TestWriteupWritesThePaper(t *testing.T) {
	testutil.RequireBinary(t, "latexmk", "scripts/services.sh install tex")
	t.Parallel()
	idea := scoreIdea(t, "llm: {model: test-model, vlm_model: test-vlm}")
	require.NoError(t, os.WriteFile(filepath.Join(idea, rundir.RefsBib), []byte("@article{williams2009roofline,\n  title={Roofline},\n  year={2009}\n}\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(idea, "resources.yaml"), []byte("- {name: STREAM benchmark, class: paper, url: https://www.cs.virginia.edu/stream/}\n"), 0o644))
	runDir, env := scoreRun(t, idea)

	paper := func(body string) string {
		return "```latex\n\\documentclass{article}\n\\begin{document}\n\\title{Scores}\\author{hpcq}\\maketitle\n" + body +
			"\n\\bibliographystyle{plain}\n\\bibliography{refs}\n\\end{document}\n```"
	}
	srv := fakellm.New(t, func(r fakellm.Request) fakellm.Reply {
		switch r.Kind {
		case "writeup":
			switch r.KindN {
			case 1:
				return fakellm.Reply{Content: paper(`The best draft scored \fact{best} points, 99.5 more than chance~\cite{invented2024}, as \cite{williams2009roofline} would not say.`)}
			case 2:
				return fakellm.Reply{Content: paper(`The best of \fact{nodes} drafts scored \fact{best} points, as \cite{williams2009roofline} would not say.`)}
			}
			return fakellm.Reply{Content: paper(`The best of \fact{nodes} drafts scored \fact{best} points (\factpct{best_gain} above the baseline), as \cite{williams2009roofline} would not say and \cite{streambenchmark} measures.`)}
		case "writeup_review":
			return fakellm.Reply{Content: `{"findings": ["Say how far the best is above the baseline."]}`}
		}
		return fakellm.Reply{Status: 400}
	})
	env = append(env, "OPENAI_BASE_URL="+srv.BaseURL())
	out, code := run(t, env, "scheduler", "writeup", "--run-dir", runDir)
	require.Equal(t, 0, code, out)
	require.Regexp(t, `writeup pdf=\S+/paper/paper.pdf pages=1 numbers=0 verified=0 unverified=0 citations=2 citations_removed=1 rounds=3\n`, out)
	require.Contains(t, out, "writeup: 4 calls")
	var drafts, models []string
	var reviewed []fakellm.Request
	for _, r := range srv.Requests() {
		switch r.Kind {
		case "writeup":
			drafts, models = append(drafts, r.Messages[len(r.Messages)-1].Content), append(models, r.Model)
		case "writeup_review":
			reviewed = append(reviewed, r)
		}
	}
	require.Len(t, drafts, 3)
	require.Equal(t, []string{"test-model", "test-model", "test-model"}, models)
	require.Contains(t, drafts[0], "# Path to the best node\n\n- n0002, draft node of stage 1: a script (score: see its facts)\n")
	require.Contains(t, drafts[0], "# Setup\n\n- worker local-1 on host ")
	require.Contains(t, drafts[0], "- `streambenchmark`: STREAM benchmark\n", "a resources.yaml paper is citable")
	require.Contains(t, drafts[1], `- 99.5 in "`, "the invented number, fed back")
	require.Contains(t, drafts[1], "Citations removed, not in the Bibliography section: invented2024")
	require.Contains(t, drafts[2], "A reader of the rendered pages asks for these changes:\n- Say how far the best is above the baseline.")
	require.Len(t, reviewed, 1)
	require.Equal(t, "test-vlm", reviewed[0].Model, "the review asks llm.vlm_model")
	require.Len(t, reviewed[0].Messages[1].Images, 1, "the page, as an image")
	require.Equal(t, "image/png", reviewed[0].Messages[1].Images[0].MIME)

	var claims rundir.Claims
	data, err := os.ReadFile(filepath.Join(runDir, rundir.PaperDir, rundir.ClaimsFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &claims))
	require.Equal(t, []string{"invented2024"}, claims.CitationsRemoved)
	require.Equal(t, rundir.PaperPDF, claims.PDF)
	require.Equal(t, 1, claims.Pages)
	require.Equal(t, 1, claims.Rounds[0].Unverified)
	require.Equal(t, "revision", claims.Rounds[2].Purpose)
	require.Len(t, claims.Stated, 3)
	for _, f := range claims.Stated {
		require.NotEmpty(t, f.SQL, f.ID)
		q, code := run(t, env, "scheduler", "query", "--run-dir", runDir, "--format", "csv", f.SQL)
		require.Equal(t, 0, code, q)
		require.Contains(t, q, strings.TrimSuffix(strings.TrimSuffix(fmt.Sprint(f.Value), ".0"), ".00"), "the query gives the number the paper prints")
	}
	tex, err := os.ReadFile(filepath.Join(runDir, rundir.PaperDir, rundir.PaperTeX))
	require.NoError(t, err)
	require.Contains(t, string(tex), `\factpct{best_gain}`)
	require.NotContains(t, string(tex), "invented2024")
	for _, f := range []string{rundir.PaperPDF, rundir.PagesDir + "/" + rundir.PagePrefix + "-1.png", rundir.DraftFile(1), rundir.DraftFile(3), "nodes/paper/prompts.jsonl"} {
		require.FileExists(t, filepath.Join(runDir, rundir.PaperDir, f))
	}
	calls, code := run(t, env, "scheduler", "query", "--run-dir", runDir, "--format", "csv",
		"SELECT purpose, count(*) AS n FROM llm_calls WHERE node = 'paper' GROUP BY purpose ORDER BY purpose")
	require.Equal(t, 0, code, calls)
	require.Contains(t, calls, "writeup,3\nwriteup_review,1\n")

	// Without TeX: the paper (the model's next: its clean one), checked; not
	// compiled; how to install it.
	noTeX := append(env, "PATH="+t.TempDir())
	out, code = run(t, noTeX, "scheduler", "writeup", "--run-dir", runDir)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "writeup: no TeX here (latexmk is not installed)")
	require.Contains(t, out, "scripts/services.sh install tex")
	require.Regexp(t, `writeup pdf=none pages=0 numbers=0 verified=0 unverified=0 citations=2 citations_removed=0 rounds=1\n`, out)
}

// TestWriteupWithinTheBudget: the writeup's calls count in the run's
// budget: once it is spent the rounds stop, and the paper is the draft
// that compiled, saying on its first page that it holds an unverified
// number.
func TestWriteupWithinTheBudget(t *testing.T) {
	testutil.RequireBinary(t, "latexmk", "scripts/services.sh install tex")
	t.Parallel()
	idea := scoreIdea(t, "llm: {model: test-model, budget: {max_tokens: 1000}}")
	runDir, env := scoreRun(t, idea)
	srv := fakellm.New(t, func(r fakellm.Request) fakellm.Reply {
		if r.Kind != "writeup" {
			return fakellm.Reply{Status: 400}
		}
		return fakellm.Reply{TokensIn: 900, TokensOut: 200, Content: "```latex\n\\documentclass{article}\n\\begin{document}\n\\title{Scores}\\maketitle\n" +
			"The best scored \\fact{best} points, 99.5 more than chance.\n\\end{document}\n```"}
	})
	out, code := run(t, append(env, "OPENAI_BASE_URL="+srv.BaseURL()), "scheduler", "writeup", "--run-dir", runDir)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "writeup: the rounds stopped early:")
	require.Contains(t, out, "budget")
	require.Contains(t, out, "writeup: 1 calls, 900 tokens in, 200 out")
	require.Regexp(t, `writeup pdf=\S+paper.pdf pages=1 numbers=1 verified=0 unverified=1 citations=0 citations_removed=0 rounds=1\n`, out)
	require.Equal(t, 1, srv.Count("writeup"), "no call past the budget")
	tex, err := os.ReadFile(filepath.Join(runDir, rundir.PaperDir, rundir.PaperTeX))
	require.NoError(t, err)
	require.Contains(t, string(tex), "Unverified numbers.", "the first page says so")
	rep, err := os.ReadFile(filepath.Join(runDir, "report.md"))
	require.NoError(t, err)
	require.Contains(t, string(rep), "**Numbers no result states**")
	require.Contains(t, string(rep), "- `99.5` in")
}

// TestWriteupWithoutTeXCompiledLater: a run written where TeX is not
// installed offers the model its SVG plots (as the PDFs a compile makes of
// them) and keeps them in paper/figures; `writeup --check paper.tex --pdf`,
// as the run's message says, then compiles the paper with its figure.
func TestWriteupWithoutTeXCompiledLater(t *testing.T) {
	testutil.RequireBinary(t, "latexmk", "scripts/services.sh install tex")
	testutil.RequireBinary(t, "rsvg-convert", "scripts/services.sh install tex")
	t.Parallel()
	idea := scoreIdea(t, "llm: {model: test-model}")
	srv := draftsLLM(t, func(n int) string {
		return runScript(`printf '<svg xmlns="http://www.w3.org/2000/svg" width="120" height="60"><rect width="80" height="40"/></svg>' > scaling.svg` +
			"\necho 'METRIC score=" + []string{"0", "12.25", "37.5"}[n] + " points'\n")
	})
	runDir := filepath.Join(t.TempDir(), "run")
	env := baseEnv(t, "OPENAI_BASE_URL="+srv.BaseURL(), "OPENAI_API_KEY=test-key")
	out, code := run(t, env, "scheduler", "run", "--local", "--run-dir", runDir, idea)
	require.Equal(t, 0, code, out)

	writer := fakellm.New(t, func(r fakellm.Request) fakellm.Reply {
		if r.Kind != "writeup" {
			return fakellm.Reply{Status: 400}
		}
		return fakellm.Reply{Content: "```latex\n\\documentclass{article}\n\\usepackage{graphicx}\n\\begin{document}\n\\title{Scores}\\maketitle\n" +
			"The best scored \\fact{best} points.\n\\begin{figure}\\includegraphics[width=0.5\\linewidth]{figures/best-scaling.pdf}\\caption{Scaling.}\\end{figure}\n" +
			"\\end{document}\n```"}
	})
	noTeX := append(baseEnv(t, "OPENAI_BASE_URL="+writer.BaseURL(), "OPENAI_API_KEY=test-key"), "PATH="+t.TempDir())
	out, code = run(t, noTeX, "scheduler", "writeup", "--run-dir", runDir)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "--check "+filepath.Join(runDir, rundir.PaperDir, rundir.PaperTeX)+" --pdf")
	var asked bool
	for _, r := range writer.Requests() {
		if r.Kind == "writeup" {
			asked = asked || strings.Contains(r.Last(), "figures/best-scaling.pdf")
		}
	}
	require.True(t, asked, "the SVG plot is offered as the PDF the compile makes")
	require.FileExists(t, filepath.Join(runDir, rundir.PaperDir, rundir.FiguresDir, "best-scaling.svg"))

	tex := filepath.Join(runDir, rundir.PaperDir, rundir.PaperTeX)
	out, code = run(t, env, "scheduler", "writeup", "--run-dir", runDir, "--check", tex, "--pdf")
	require.Equal(t, 0, code, out)
	require.Regexp(t, `writeup check pdf=\S+paper.pdf pages=1 numbers=0 verified=0 unverified=0 facts_cited=1`, out)
	require.FileExists(t, filepath.Join(runDir, rundir.PaperDir, rundir.PaperPDF))
}
