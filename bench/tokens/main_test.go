package main

import (
	"bytes"
	"compress/gzip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	benchtrace "github.com/hpcq/hpcq/bench/trace"
	"github.com/hpcq/hpcq/pkg/memory"
)

const mini = `{"branch":"root","op":"fork","parent":null}
{"branch":"a","op":"fork","parent":"root"}
{"branch":"root","key":"best_flags","op":"core_set","value":"o3"}
{"branch":"root","dup":false,"kind":"node_result","op":"recall_append","text":"root event"}
{"branch":"root","dup":false,"op":"archival_write","tags":["kind:idea"],"text":"tile by 32"}
{"branch":"b","op":"fork","parent":"root"}
{"branch":"b","dup":true,"op":"archival_write","tags":["kind:idea"],"text":"tile  by 32"}
{"branch":"b","dup":false,"kind":"node_result","op":"recall_append","text":"b event"}
{"branch":"a","dup":false,"kind":"node_result","op":"recall_append","text":"a event"}
{"branch":"b","budget_chars":24000,"op":"render","task_hint":"improve"}
`

// TestBuild: a branch sees its ancestors' writes from before it forked,
// not after; a repeat of a visible fact counts, it is not a new fact.
func TestBuild(t *testing.T) {
	var ops []op
	for _, l := range strings.Split(strings.TrimSpace(mini), "\n") {
		o, err := benchtrace.Parse([]byte(l))
		require.NoError(t, err)
		ops = append(ops, o)
	}
	tree, err := build(ops)
	require.NoError(t, err)
	byID := map[string]memory.State{}
	for _, b := range tree.Branches {
		byID[b.ID] = b.State
	}
	require.Len(t, byID["root"].Recall, 1)
	require.Equal(t, []memory.StateEvent{{Kind: "node_result", Node: "a", Payload: "a event"}}, byID["a"].Recall, "forked before the root wrote")
	require.Empty(t, byID["a"].Core)
	b := byID["b"]
	require.Len(t, b.Recall, 2, "the root's event and its own")
	require.Equal(t, []memory.StateFact{{Text: "tile by 32", Tags: []string{"kind:idea"}, Count: 2}}, b.Archival)
	require.Equal(t, 1, byID["root"].Archival[0].Count, "the repeat is b's, not the root's")

	tree2, err := build(treeOrder(ops))
	require.NoError(t, err)
	require.Len(t, tree2.Branches[1].State.Recall, 2, "in tree order a sees the root's writes")
}

// TestBenchLines: the command prints its fixed lines, round trips ok.
func TestBenchLines(t *testing.T) {
	dir := t.TempDir()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write([]byte(mini))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "memory-trace-mini.jsonl.gz"), buf.Bytes(), 0o644))
	out, err := exec.Command("go", "run", ".", "-dir", dir, "-trace", "mini", "-runs", "1").Output()
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Len(t, lines, 12)
	re := regexp.MustCompile(`^bench-tokens trace=mini(-tree)? format=(verbose|compact|L0|L1|L2|delta) tokens=\d+ tokens_per_fact=[0-9.]+ serialize_us=[0-9.]+ deserialize_us=[0-9.]+ round_trip=(ok|n/a)$`)
	for _, l := range lines {
		require.Regexp(t, re, l)
	}
	require.Contains(t, string(out), "trace=mini format=compact")
	require.NotContains(t, string(out), "failed")
}

// TestTokenizer: cl100k_base from the embedded files.
func TestTokenizer(t *testing.T) {
	enc, err := encoding()
	require.NoError(t, err)
	require.Equal(t, []int{15339, 1917}, enc.Encode("hello world", nil, nil), "cl100k_base's ids for it")
}
