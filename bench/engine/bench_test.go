package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMain: the benchmark starts its workers and endpoint in a child, this
// binary again.
func TestMain(m *testing.M) {
	if url := os.Getenv(childEnv); url != "" {
		if err := child(url); err != nil {
			fmt.Fprintln(os.Stderr, "bench-engine child:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(m.Run())
}

// TestBenchLine: a small tree through the whole benchmark prints its line.
func TestBenchLine(t *testing.T) {
	heap := filepath.Join(t.TempDir(), "heap")
	line, err := measure(40, 2, 4, t.TempDir(), heap)
	require.NoError(t, err)
	fi, err := os.Stat(heap + ".40")
	require.NoError(t, err, "the heap profile at 95% of the nodes")
	require.NotZero(t, fi.Size())
	require.Regexp(t, regexp.MustCompile(`^bench-engine nodes=40 workers=2 slots=4 sched_cpu_ms_per_node_p50=[0-9.]+ sched_cpu_ms_per_node_p99=[0-9.]+ wall_s=[0-9.]+ resume_s=[0-9.]+ peak_rss_mb=[0-9]+ journal_bytes=[1-9][0-9]*$`), line)
	t.Log(line)
}
