package memory_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/memory/sqlite"
)

// TestRecallWriterShip: Ship opens a run's store and closes it again; an
// Append to that run meanwhile waits until the store is closed (one store
// per run's spool at a time: a second would find the spool locked), or
// until its context ends; an Append to another run does not wait; a run
// the writer has open is not opened again.
func TestRecallWriterShip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	var mu sync.Mutex
	opens, open := map[string]int{}, map[string]int{}
	var overlaps []string
	held := map[string]chan struct{}{"a": make(chan struct{}), "c": make(chan struct{})} // the first open of each waits
	inShip := map[string]chan struct{}{"a": make(chan struct{}), "c": make(chan struct{})}
	w := memory.NewRecallWriter(func(ctx context.Context, run string) (memory.Store, func() error, error) {
		mu.Lock()
		opens[run]++
		first := opens[run] == 1
		if open[run] > 0 {
			overlaps = append(overlaps, run)
		}
		open[run]++
		mu.Unlock()
		if first && held[run] != nil {
			close(inShip[run])
			<-held[run]
		}
		st, err := sqlite.Open(filepath.Join(dir, run+".sqlite"), sqlite.Options{})
		if err != nil {
			return nil, nil, err
		}
		if _, err := st.Fork(ctx, memory.ForkParams{Branch: "n1"}); err != nil && !errors.Is(err, memory.ErrBranchExists) {
			st.Close()
			return nil, nil, err
		}
		return st, func() error {
			mu.Lock()
			open[run]--
			mu.Unlock()
			return st.Close()
		}, nil
	})
	ev := memory.RecallEvent{Kind: "phase_started", NodeID: "n1", Phase: "run", TS: time.Now()}
	appendTo := func(ctx context.Context, run string) <-chan error {
		done := make(chan error, 1)
		go func() { done <- w.Append(ctx, run, "n1", false, ev) }()
		return done
	}
	within := func(done <-chan error, what string) error {
		t.Helper()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: still waiting after 30 s", what)
			return nil
		}
	}

	shipped := make(chan error, 1)
	go func() { shipped <- w.Ship(ctx, "a") }()
	<-inShip["a"]
	toA := appendTo(ctx, "a")
	require.NoError(t, within(appendTo(ctx, "b"), "an Append to another run"))
	time.Sleep(50 * time.Millisecond) //nolint:forbidigo // room for a wrong Append to open a second store of "a"
	select {
	case err := <-toA:
		t.Fatalf("an Append to the run being shipped returned before Ship closed its store: %v", err)
	default:
	}
	close(held["a"])
	require.NoError(t, within(shipped, "Ship"))
	require.NoError(t, within(toA, "the Append after Ship"))

	// The writer has "a" open now: Ship leaves it to that store.
	require.NoError(t, w.Ship(ctx, "a"))

	// An Append whose context ends while a Ship holds its run returns.
	go func() { shipped <- w.Ship(ctx, "c") }()
	<-inShip["c"]
	cctx, cancel := context.WithCancel(ctx)
	toC := appendTo(cctx, "c")
	cancel()
	require.ErrorIs(t, within(toC, "an Append whose context ended"), context.Canceled)
	close(held["c"])
	require.NoError(t, within(shipped, "Ship of c"))

	require.NoError(t, w.Close())
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, overlaps, "two stores of one run open at once")
	require.Equal(t, map[string]int{"a": 2, "b": 1, "c": 1}, opens)
	require.Equal(t, map[string]int{"a": 0, "b": 0, "c": 0}, open, "every store closed")
}
