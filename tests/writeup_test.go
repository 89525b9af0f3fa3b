package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/writeup"
)

// TestWriteupChecksAPaper: after a search, `scheduler writeup` writes the
// run's facts (each with the SQL that gives it) and the macros that state
// them; a paper that states a number no experiment produced fails the
// check, with the number and where it is; stated through the facts, or as
// their rounded values, it passes.
func TestWriteupChecksAPaper(t *testing.T) {
	t.Parallel()
	srv := draftsLLM(t, func(n int) string {
		return runScript("echo 'METRIC score=" + []string{"0", "12.25", "37.5"}[n] + " points'\n")
	})
	runDir := filepath.Join(t.TempDir(), "run")
	env := baseEnv(t, "OPENAI_BASE_URL="+srv.BaseURL(), "OPENAI_API_KEY=test-key")
	out, code := run(t, env, "scheduler", "run", "--local", "--run-dir", runDir, writeIdea(t, 2, 1))
	require.Equal(t, 0, code, out)

	out, code = run(t, env, "scheduler", "writeup", "--run-dir", runDir)
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
	require.Regexp(t, `writeup check numbers=4 verified=3 unverified=1 facts_cited=1 unknown_facts=0 claims=\S+claims.json`, out)
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
