package llm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/testutil"
)

// TestCache: through the fake endpoint, counting the requests it receives.
// A reproducible request (temperature 0) is asked once and then served from
// the run's cache, at no cost and outside the budget, as an llm_calls row
// with cache_hit; other settings are asked each time unless the run opts
// in; a cache shared between runs serves another run's directory; a broken
// entry is asked again; a failed request is not stored.
func TestCache(t *testing.T) {
	t.Parallel()
	fail := false
	f := newFake(t, func(n int64, body map[string]any) (int, map[string]string, string, time.Duration) {
		if fail {
			return 400, nil, "bad", 0
		}
		return 200, nil, fmt.Sprintf("reply %d to %v", n, body["model"]), 0
	})
	live, _ := client(t, f, OpenAIOptions{MaxAttempts: 1})
	zero, warm := 0.0, 0.7
	at := func(temp *float64, text string) Request {
		r := ask(text)
		r.Temperature = temp
		return r
	}
	shared := t.TempDir()
	runA := filepath.Join(t.TempDir(), "llm-cache")
	var calls []Call
	m := &Metered{Client: &Cache{Client: live, Dirs: []string{runA, shared}, Model: "test-model", Logger: testutil.Logger(t)},
		Prices: Prices{"test-model": {InPerMTok: 2, OutPerMTok: 10}}, Budget: Budget{MaxTokens: 400},
		Record: func(_ context.Context, c Call) { calls = append(calls, c) }}
	ctx := context.Background()

	first, err := m.Chat(ctx, at(&zero, "stencil"))
	require.NoError(t, err)
	require.False(t, first.CacheHit)
	again, err := m.Chat(ctx, at(&zero, "stencil"))
	require.NoError(t, err)
	require.True(t, again.CacheHit)
	require.Equal(t, first.Content, again.Content)
	require.EqualValues(t, 1, f.calls.Load(), "asked once")
	require.Len(t, calls, 2)
	require.True(t, calls[1].CacheHit)
	require.Zero(t, calls[1].CostUSD)
	require.Positive(t, calls[0].CostUSD)
	u := m.Usage()
	require.EqualValues(t, 120, u.TokensIn+u.TokensOut, "the budget counts the real call only")
	require.EqualValues(t, 1, u.CacheHits)
	for range 3 { // hits never spend the budget (400 tokens: 4 real calls)
		_, err := m.Chat(ctx, at(&zero, "stencil"))
		require.NoError(t, err)
	}

	// Another prompt, or the same at another temperature, is another request.
	_, err = m.Chat(ctx, at(&zero, "transpose"))
	require.NoError(t, err)
	require.EqualValues(t, 2, f.calls.Load())
	for range 2 {
		_, err = m.Chat(ctx, at(&warm, "transpose"))
		require.NoError(t, err)
	}
	require.EqualValues(t, 4, f.calls.Load(), "a sampled reply is not reproducible: asked each time")
	spent, _ := m.Spent()
	require.True(t, spent, "4 real calls spent the budget")

	// The run that opts in caches every request.
	all := &Cache{Client: live, Dirs: []string{t.TempDir()}, All: true, Model: "test-model"}
	for range 2 {
		_, err = all.Chat(ctx, at(&warm, "gemm"))
		require.NoError(t, err)
	}
	require.EqualValues(t, 5, f.calls.Load())

	// Another run sharing the directory: served from it, and the entry is
	// copied into its own cache.
	runB := t.TempDir()
	b := &Cache{Client: live, Dirs: []string{runB, shared}, Model: "test-model"}
	resp, err := b.Chat(ctx, at(&zero, "stencil"))
	require.NoError(t, err)
	require.True(t, resp.CacheHit)
	require.Equal(t, first.Content, resp.Content)
	key, _ := b.cacheKey(at(&zero, "stencil"))
	require.FileExists(t, cachePath(runB, key))
	// A run of another model does not get it.
	other := &Cache{Client: live, Dirs: []string{t.TempDir(), shared}, Model: "other-model"}
	resp, err = other.Chat(ctx, at(&zero, "stencil"))
	require.NoError(t, err)
	require.False(t, resp.CacheHit)
	require.EqualValues(t, 6, f.calls.Load())

	// A broken entry is asked again and written anew.
	require.NoError(t, os.WriteFile(cachePath(runB, key), []byte("{not json"), 0o644))
	require.NoError(t, os.WriteFile(cachePath(shared, key), []byte(`{"key":"x"}`), 0o644))
	resp, err = b.Chat(ctx, at(&zero, "stencil"))
	require.NoError(t, err)
	require.False(t, resp.CacheHit)
	require.EqualValues(t, 7, f.calls.Load())
	resp, err = b.Chat(ctx, at(&zero, "stencil"))
	require.NoError(t, err)
	require.True(t, resp.CacheHit)

	// A failed request stores nothing.
	fail = true
	_, err = b.Chat(ctx, at(&zero, "fails"))
	require.Error(t, err)
	k, _ := b.cacheKey(at(&zero, "fails"))
	require.NoFileExists(t, cachePath(runB, k))
}
