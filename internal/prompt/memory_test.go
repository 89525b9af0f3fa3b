package prompt

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/fakellm"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/memory/sqlite"
)

func TestCompressor(t *testing.T) {
	t.Parallel()
	s := fakellm.New(t, func(r fakellm.Request) fakellm.Reply {
		if r.N == 2 {
			return fakellm.Reply{Content: "  "}
		}
		return fakellm.Reply{Content: "```text\ntile 32, 12.5 GFLOP/s\n```"}
	})
	comp := Compressor{Client: fakeClient(t, s), Node: "n7"}
	out, err := comp.Compress(context.Background(), strings.Repeat("long log line with tile 32 and 12.5 GFLOP/s\n", 50), 300, "archival")
	require.NoError(t, err)
	require.Equal(t, "tile 32, 12.5 GFLOP/s", out, "the fence is removed")
	prompt := s.Requests()[0].Messages[0].Content
	require.Contains(t, prompt, "Compress the following archival text to fit within 300 characters.")
	require.Contains(t, prompt, "Key facts, metrics, and numerical values")
	require.Contains(t, prompt, "long log line with tile 32")
	_, err = comp.Compress(context.Background(), "x", 300, "")
	require.ErrorContains(t, err, "empty reply")
}

// TestSummarizerInMemory: the memory folds events out of its window through
// the model; a reply that is not a summary leaves the memory as it was.
func TestSummarizerInMemory(t *testing.T) {
	t.Parallel()
	var bad atomic.Bool
	s := fakellm.New(t, func(r fakellm.Request) fakellm.Reply {
		if bad.Load() {
			return fakellm.Reply{Content: `I folded it!`}
		}
		user := r.Messages[1].Content
		i := strings.Index(user, "Event to fold in")
		return fakellm.Reply{Content: fmt.Sprintf(`{"summary": "folded %d: %s"}`, r.N, strings.TrimSpace(strings.SplitN(user[i:], "\n", 3)[1]))}
	})
	ctx := context.Background()
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "m.sqlite"), sqlite.Options{})
	require.NoError(t, err)
	defer store.Close()
	m := memory.New(store, memory.Config{RecallMaxEvents: 2}, memory.Options{Summarizer: Summarizer{Client: fakeClient(t, s)}})
	_, err = m.Fork(ctx, "root", "")
	require.NoError(t, err)
	for i := range 3 {
		_, err := m.RecallAppend(ctx, "root", memory.RecallEvent{Kind: "compile_failed", Payload: fmt.Sprintf("error %d", i)})
		require.NoError(t, err)
	}
	sum, window, err := m.RecallWindow(ctx, "root")
	require.NoError(t, err)
	require.Equal(t, "folded 1: error 0", sum.Text)
	require.Len(t, window, 2)
	require.True(t, s.Requests()[0].JSON, "a JSON object is asked for")

	bad.Store(true)
	_, err = m.RecallAppend(ctx, "root", memory.RecallEvent{Kind: "run_failed", Payload: "error 3"})
	require.NoError(t, err)
	sum, _, err = m.RecallWindow(ctx, "root")
	require.NoError(t, err)
	require.Equal(t, "folded 1: error 0", sum.Text, "the fallback: the summary is unchanged")
}

func TestParseSummary(t *testing.T) {
	t.Parallel()
	for reply, want := range map[string]string{
		`{"summary": "tile 32 wins"}`:                    "tile 32 wins",
		"```json\n{\"summary\": \" spaced \"}\n```":      "spaced",
		`  {"summary": "x", "notes": "ignored field"}  `: "x",
	} {
		got, err := ParseSummary(reply)
		require.NoError(t, err, reply)
		require.Equal(t, want, got)
	}
	for _, bad := range []string{``, `summary: x`, `{"summary": ""}`, `{"summary": 3}`, `{}`, `{"summary": "a"} {"summary": "b"}`, `[1]`} {
		_, err := ParseSummary(bad)
		require.Error(t, err, bad)
	}
}

// FuzzParseSummary: any model reply parses or fails cleanly; a parsed
// summary is never empty.
func FuzzParseSummary(f *testing.F) {
	f.Add(`{"summary": "x"}`)
	f.Add("```\n{\"summary\": \"y\"}\n```")
	f.Add("```")
	f.Fuzz(func(t *testing.T, reply string) {
		s, err := ParseSummary(reply)
		if err == nil {
			require.NotEmpty(t, strings.TrimSpace(s))
		}
	})
}
