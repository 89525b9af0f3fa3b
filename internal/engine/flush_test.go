package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/run"
	"github.com/hpcq/hpcq/internal/testutil"
)

// TestFlushSaysWhatItWaitsFor: a run ending while a store's server is away
// says, after a moment, what it waits for, how long it may, and that a
// second interrupt leaves the writes in the spool; the second interrupt
// (Params.Abandon) ends the wait at once.
func TestFlushSaysWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	abandon := make(chan struct{})
	out := &lockedBuilder{b: &strings.Builder{}}
	e := bareEngine(t, "", run.Spec{})
	e.p = Params{Abandon: abandon, Progress: out}
	blocked := func(ctx context.Context) error { <-ctx.Done(); return context.Cause(ctx) }
	done := make(chan error, 1)
	go func() {
		done <- e.flushOne(context.Background(), blocked, "memory", "they are applied on --resume", 10*time.Minute)
	}()
	testutil.Eventually(t, 10*time.Second, "the wait said", func() bool { return strings.Contains(out.String(), "waiting") })
	require.Contains(t, out.String(), "waiting for the memory writes to reach their server (up to 10m0s); interrupt again to leave them in the spool: they are applied on --resume")
	start := time.Now()
	close(abandon)
	select {
	case err := <-done:
		require.ErrorIs(t, err, errAbandoned)
		require.Less(t, time.Since(start), time.Second)
	case <-time.After(5 * time.Second):
		t.Fatal("the second interrupt did not end the wait")
	}

	// A flush that ends quickly says nothing.
	out = &lockedBuilder{b: &strings.Builder{}}
	e.p.Abandon, e.p.Progress = nil, out
	require.NoError(t, e.flushOne(context.Background(), func(context.Context) error { return nil }, "results", "", time.Minute))
	require.Empty(t, out.String())
}
