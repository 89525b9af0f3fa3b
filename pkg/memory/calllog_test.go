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
