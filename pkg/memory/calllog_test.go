package memory_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/memory/sqlite"
)

// TestCallLogKeepsContent: memory_calls.jsonl keeps what went in and came
// out of each operation, redacted, cut to memory_log_max_chars.
func TestCallLogKeepsContent(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "m.sqlite"), sqlite.Options{Run: "r"})
	require.NoError(t, err)
	defer st.Close()
	var log bytes.Buffer
	cfg := memory.Defaults()
	cfg.LogMaxChars = 40
	m := memory.New(st, cfg, memory.Options{Calls: &log})
	ctx := context.Background()
	_, err = m.Fork(ctx, "n1", "")
	require.NoError(t, err)
	_, err = m.CoreSet(ctx, memory.CoreSetParams{Branch: "n1", Key: "flags", Value: "password=hunter22 " + strings.Repeat("x", 100)})
	require.NoError(t, err)
	_, _, err = m.CoreGet(ctx, "n1", "flags")
	require.NoError(t, err)
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		var c map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &c))
		lines = append(lines, c)
	}
	require.Len(t, lines, 3)
	set := lines[1]
	require.Equal(t, "core_set", set["op"])
	require.True(t, strings.HasPrefix(set["input"].(string), "flags: password=[REDACTED] xxx"), set["input"])
	require.True(t, strings.HasSuffix(set["input"].(string), "…[cut]"))
	require.NotContains(t, log.String(), "hunter22")
	require.Greater(t, set["in_bytes"].(float64), 100.0, "the size is the whole input's")
	require.Equal(t, "flags", lines[2]["input"])
	require.Contains(t, lines[2]["output"], "password=[REDACTED]")
}

// TestArchivalWrites: texts written together are stored as one at a time
// would be (redacted, a repeat counted), all or none, with one call log
// line.
func TestArchivalWrites(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "m.sqlite"), sqlite.Options{Run: "r"})
	require.NoError(t, err)
	defer st.Close()
	var log bytes.Buffer
	m := memory.New(st, memory.Defaults(), memory.Options{Calls: &log})
	ctx := context.Background()
	_, err = m.Fork(ctx, "n1", "")
	require.NoError(t, err)
	_, _, err = m.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: "n1", Text: "the stencil kernel vectorizes", Context: "first"})
	require.NoError(t, err)
	log.Reset()

	require.NoError(t, m.ArchivalWrites(ctx, "n1", []memory.ArchivalWriteParams{
		{Text: "blocking by 64 doubled the bandwidth", Tags: []string{"SUCCESS"}, Context: "node n1"},
		{Text: "the stencil kernel vectorizes", Context: "again"},
		{Text: "token=abcdef0123456789abcdef0123456789 leaked", Context: "node n1"},
	}))
	hits, err := m.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: "n1", Query: "stencil kernel vectorizes blocking bandwidth leaked", K: 10})
	require.NoError(t, err)
	texts := map[string]memory.ArchivalItem{}
	for _, h := range hits {
		texts[h.Text] = h
	}
	require.Len(t, texts, 3, "%v", hits)
	require.Equal(t, []string{"SUCCESS"}, texts["blocking by 64 doubled the bandwidth"].Tags)
	require.Equal(t, 2, texts["the stencil kernel vectorizes"].Count, "the repeat is counted, not stored again")
	require.Contains(t, texts, "token="+memory.Redacted+" leaked")
	require.NotContains(t, log.String(), "abcdef0123456789")

	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	var c map[string]any
	require.Len(t, lines, 2, "one line for the writes, one for the search")
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &c))
	require.Equal(t, "archival_write", c["op"])
	require.Equal(t, 3.0, c["items"])
	require.True(t, strings.HasPrefix(c["input"].(string), "blocking by 64 doubled the bandwidth\nthe stencil kernel vectorizes\n"), c["input"])

	// A blank text refuses the whole batch: nothing of it is stored.
	err = m.ArchivalWrites(ctx, "n1", []memory.ArchivalWriteParams{{Text: "prefetching hid the latency"}, {Text: "  "}})
	require.ErrorIs(t, err, memory.ErrInvalid)
	hits, err = m.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: "n1", Query: "prefetching latency", K: 10})
	require.NoError(t, err)
	require.Empty(t, hits)
	require.NoError(t, m.ArchivalWrites(ctx, "n1", nil))
}
