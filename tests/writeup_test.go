package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/internal/writeup"
)

// TestWriteupChecksAPaper: after a search, `scheduler writeup` writes the
// run's facts (each with the SQL that gives it) and the macros that state
// them; a paper that states a number no experiment produced fails the
// check, with the number and where it is; stated through the facts, or as
// their rounded values, it passes.
func TestWriteupChecksAPaper(t *testing.T) {
	t.Parallel()
	runDir, env := scoreRun(t, writeIdea(t, 2, 1))
	out, code := run(t, env, "scheduler", "writeup", "--run-dir", runDir)
	require.Equal(t, 0, code, out)
	require.Regexp(t, `writeup facts=\d+ facts_json=\S+facts.json facts_tex=\S+facts.tex`, out)
	data, err := os.ReadFile(filepath.Join(runDir, "paper", "facts.json"))
	require.NoError(t, err)
	var facts []writeup.Fact
	require.NoError(t, json.Unmarshal(data, &facts))
	byID := map[string]writeup.Fact{}
	for _, f := range facts {
		byID[f.ID] = f
	}
	require.Equal(t, 37.5, byID["best"].Value)
	require.Contains(t, byID["best"].SQL, "FROM nodes WHERE run = ")
	require.Equal(t, 1.0, byID["best_over_baseline"].Value, "stage 1's best is the baseline: here the best too")
	tex, err := os.ReadFile(filepath.Join(runDir, "paper", "facts.tex"))
	require.NoError(t, err)
	require.Contains(t, string(tex), `\@namedef{hpcqfact@best}{37.5}`)

	paper := filepath.Join(t.TempDir(), "paper.tex")
	invented := `\section{Results}The best draft scored \fact{best} points in 2026 (Table~1), against 12.3 for the other; a third reached 41.0.`
	require.NoError(t, os.WriteFile(paper, []byte(invented), 0o644))
	out, code = run(t, env, "scheduler", "writeup", "--run-dir", runDir, "--check", paper)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, `unverified: 41.0 (in "`)
	require.Regexp(t, `writeup check numbers=4 verified=3 unverified=1 facts_cited=1 unknown_facts=0 citations=0 unknown_citations=0 claims=\S+claims.json`, out)
	var report writeup.Report
	data, err = os.ReadFile(filepath.Join(runDir, "paper", "claims.json"))
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
}

// TestWriteupCompilesAPaper: a paper that states the run's facts by id and
// cites the idea's bibliography compiles in a task's sandbox to a PDF whose
// pages are rendered; a citation the bibliography lacks is caught; a paper
// whose LaTeX fails says why.
func TestWriteupCompilesAPaper(t *testing.T) {
	testutil.RequireBinary(t, "latexmk", "scripts/services.sh install tex")
	t.Parallel()
	idea := writeIdea(t, 2, 1)
	require.NoError(t, os.WriteFile(filepath.Join(idea, "refs.bib"), []byte("@article{williams2009roofline,\n  author={Samuel Williams and Andrew Waterman and David Patterson},\n"+
		"  title={Roofline: an insightful visual performance model for multicore architectures},\n  journal={Communications of the ACM},\n  year={2009}\n}\n"), 0o644))
	runDir, env := scoreRun(t, idea)

	paper := filepath.Join(t.TempDir(), "paper.tex")
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
	pdf, err := os.ReadFile(filepath.Join(runDir, "paper", "paper.pdf"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(pdf), "%PDF-"))
	pngs, _ := filepath.Glob(filepath.Join(runDir, "paper", "pages", "page-*.png"))
	require.Len(t, pngs, 1)

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
