package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/schema"
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

// TestBenchLine: a small tree through the whole benchmark prints its
// line; with -code-bytes each node's code has a C file of that size.
func TestBenchLine(t *testing.T) {
	heap := filepath.Join(t.TempDir(), "heap")
	base := t.TempDir()
	line, err := measure(40, 2, 4, 4000, base, heap)
	require.NoError(t, err)
	task, err := os.ReadFile(filepath.Join(base, "run-bench-40", "nodes", "n0001", "task.json"))
	require.NoError(t, err)
	var tk schema.NodeTask
	require.NoError(t, json.Unmarshal(task, &tk))
	files := tk.Artifacts.Coding.Workspace.Files
	require.Len(t, files, 2)
	require.Equal(t, "stencil.c", files[1].Path)
	require.InDelta(t, 4000, len(files[1].Content), 400)
	require.Contains(t, files[1].Content, "#pragma omp parallel for")
	fi, err := os.Stat(heap + ".40")
	require.NoError(t, err, "the heap profile at 95% of the nodes")
	require.NotZero(t, fi.Size())
	require.Regexp(t, regexp.MustCompile(`^bench-engine nodes=40 workers=2 slots=4 sched_cpu_ms_per_node_p50=[0-9.]+ sched_cpu_ms_per_node_p99=[0-9.]+ wall_s=[0-9.]+ resume_s=[0-9.]+ peak_rss_mb=[0-9]+ journal_bytes=[1-9][0-9]*$`), line)
	t.Log(line)
}
