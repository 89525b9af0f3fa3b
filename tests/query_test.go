package tests

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/testutil"
)

// TestPrintedQueryIsTheRunsOwn: two runs keep their results in one
// ClickHouse; the query line each prints at its end, run as printed,
// answers that run's nodes only, once each, and says which run it
// answered for; across runs is an explicit --all-runs.
func TestPrintedQueryIsTheRunsOwn(t *testing.T) {
	testutil.RequireBinary(t, "clickhouse-client", "scripts/services.sh install clickhouse")
	t.Parallel()
	ch := testutil.StartService(t, "clickhouse")
	srv := draftsLLM(t, func(n int) string { return runScript("echo 'METRIC score=" + strconv.Itoa(n) + "'\n") })
	env := baseEnv(t, "OPENAI_BASE_URL="+srv.BaseURL(), "OPENAI_API_KEY=test-key", "HPCQ_CLICKHOUSE_DSN="+ch.Env["HPCQ_CLICKHOUSE_DSN"],
		"HPCQ_SPOOL_DIR="+t.TempDir())
	lineRe := regexp.MustCompile(`query:  \S+ query --run-dir (\S+) "([^"]+)"`)
	for _, c := range []struct {
		id     string
		drafts int
	}{{"run-one", 2}, {"run-two", 3}} {
		dir := filepath.Join(t.TempDir(), c.id)
		out, code := run(t, env, "scheduler", "run", "--local", "--run-dir", dir, writeIdea(t, c.drafts, 1))
		require.Equal(t, 0, code, out)
		m := lineRe.FindStringSubmatch(out)
		require.NotNil(t, m, out)
		require.Equal(t, dir, m[1])
		q, code := run(t, env, "scheduler", "query", "--run-dir", m[1], m[2])
		require.Equal(t, 0, code, q)
		require.Contains(t, q, "answered for run "+c.id+" in ClickHouse (each table read as that run's rows, FINAL")
		rows := regexp.MustCompile(`(?m)^n\d{4}\s`).FindAllString(q, -1)
		require.Len(t, rows, c.drafts, "this run's nodes, once each:\n%s", q)
	}
	q, code := run(t, env, "scheduler", "query", "--all-runs", "--format", "csv", "SELECT run, count() AS n FROM nodes FINAL GROUP BY run ORDER BY run")
	require.Equal(t, 0, code, q)
	require.True(t, strings.HasSuffix(q, "run,n\nrun-one,2\nrun-two,3\n"), q)
}
