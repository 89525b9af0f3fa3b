package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/testutil"
)

// miniTrace writes a small trace in the format of ../shared/bench.
func miniTrace(t *testing.T) string {
	t.Helper()
	var lines []string
	lines = append(lines, `{"branch":"root","op":"fork","parent":null}`)
	for i := 1; i <= 3; i++ {
		b := fmt.Sprintf("b%04d", i)
		lines = append(lines, fmt.Sprintf(`{"branch":"%s","op":"fork","parent":"root"}`, b))
	}
	lines = append(lines, `{"branch":"b0098","op":"fork","parent":"b0001"}`)
	for _, b := range []string{"root", "b0001", "b0002", "b0003", "b0098"} {
		lines = append(lines,
			fmt.Sprintf(`{"branch":"%s","key":"best_flags","op":"core_set","value":"o3 tile 32"}`, b),
			fmt.Sprintf(`{"branch":"%s","dup":false,"kind":"node_result","op":"recall_append","text":"cache flags tile"}`, b),
			fmt.Sprintf(`{"branch":"%s","dup":false,"op":"archival_write","tags":["kind:compile_output"],"text":"improve simd halo openmp %s"}`, b, b),
			fmt.Sprintf(`{"branch":"%s","budget_chars":24000,"op":"render","task_hint":"improve"}`, b),
			fmt.Sprintf(`{"branch":"%s","k":8,"op":"archival_search","query":"simd halo"}`, b))
	}
	dir := t.TempDir()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write([]byte(strings.Join(lines, "\n") + "\n"))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "memory-trace-mini.jsonl.gz"), buf.Bytes(), 0o644))
	return dir
}

var (
	opLine      = regexp.MustCompile(`^bench-memory trace=mini store=(\S+) op=(fork|core_set|recall_append|archival_write|render|archival_search) n=\d+ ops_per_s=[0-9.]+ p50_ms=[0-9.]+ p95_ms=[0-9.]+ p99_ms=[0-9.]+$`)
	summaryLine = regexp.MustCompile(`^bench-memory trace=mini store=(\S+) export=ok db_bytes=[1-9]\d* peak_rss_mb=[0-9.]+ renders_at_budget=\d+ renders_with_archival=5 search_zero_hits=0$`)
	archLine    = regexp.MustCompile(`^bench-archival store=(\S+) n_docs=5000 search_p50_ms=[0-9.]+ search_p95_ms=[0-9.]+ insert_docs_per_s=[0-9.]+$`)
)

// checkBench runs the trace and the archival benchmark on a store and
// checks the lines they print.
func checkBench(t *testing.T, store string) {
	var out, log bytes.Buffer
	require.NoError(t, run("mini", store, miniTrace(t), &out, &log), log.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 7, out.String())
	for _, l := range lines[:6] {
		require.Regexp(t, opLine, l)
		require.Contains(t, l, "store="+store+" ")
	}
	require.Regexp(t, summaryLine, lines[6])
	out.Reset()
	require.NoError(t, runArchival(store, 5000, &out, &log), log.String())
	require.Regexp(t, archLine, strings.TrimSpace(out.String()))
	require.Contains(t, out.String(), "store="+store+" ")
	out.Reset()
	// The benchmark checks each search's count of the lesson itself.
	require.NoError(t, runRepeats(store, 50, &out, &log), log.String())
	require.Regexp(t, `^bench-repeats store=`+regexp.QuoteMeta(store)+` repeats=50 search_p50_ms=[0-9.]+ search_p95_ms=[0-9.]+$`, strings.TrimSpace(out.String()))
}

func TestBenchSQLite(t *testing.T) { checkBench(t, "sqlite") }

func TestBenchRedisClickHouse(t *testing.T) {
	r := testutil.StartService(t, "redis")
	c := testutil.StartService(t, "clickhouse")
	t.Setenv("HPCQ_REDIS_URL", r.Env["HPCQ_REDIS_URL"])
	t.Setenv("HPCQ_CLICKHOUSE_DSN", c.Env["HPCQ_CLICKHOUSE_DSN"])
	checkBench(t, "redis+clickhouse")
}
