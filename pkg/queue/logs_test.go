package queue_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/queue"
)

// follow runs FollowLogs in the background; the returned channel gives its
// error.
func follow(ctx context.Context, q *queue.Queue, phase string, done <-chan struct{}, out *testutil.Buffer) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- q.FollowLogs(ctx, "r", "n1", 1, phase, true, done, out) }()
	return errc
}

func waitErr(t *testing.T, errc <-chan error, within time.Duration) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(within):
		t.Fatalf("FollowLogs did not return within %v", within)
		return nil
	}
}

// TestFollowLogs: what was sent is printed; a followed phase ends at its end
// marker; following every phase ends when done is closed, after reading
// what the stream holds up to then; without follow it prints and returns.
func TestFollowLogs(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv *testutil.NATS) {
		ctx := ctxT(t)
		q := srv.Queue(t, queue.Options{})

		var empty testutil.Buffer
		require.NoError(t, q.FollowLogs(ctx, "r", "n1", 1, "", false, nil, &empty), "no output yet: nothing to print")
		require.Empty(t, empty.String())

		compile := q.LogWriter("r", "n1", 1, "compile")
		fmt.Fprintln(compile, "compiling")
		require.NoError(t, compile.Close())
		run := q.LogWriter("r", "n1", 1, "run")
		fmt.Fprintln(run, "line 1")

		var runOut testutil.Buffer
		runDone := follow(ctx, q, "run", nil, &runOut)
		var allOut testutil.Buffer
		nodeDone := make(chan struct{})
		allDone := follow(ctx, q, "", nodeDone, &allOut)
		testutil.Eventually(t, 10*time.Second, "the output so far", func() bool {
			return strings.Contains(runOut.String(), "line 1") && strings.Contains(allOut.String(), "line 1")
		})
		require.NotContains(t, runOut.String(), "compiling", "only the run phase")

		// A big burst: every byte arrives, in order.
		var want strings.Builder
		for i := 2; i < 5000; i++ {
			fmt.Fprintf(&want, "line %d\n", i)
		}
		_, _ = run.Write([]byte(want.String()))
		require.NoError(t, run.Close())
		require.NoError(t, waitErr(t, runDone, 10*time.Second), "the run phase's end marker ends its follow")
		require.Equal(t, "line 1\n"+want.String(), runOut.String())

		require.NoError(t, q.Flush(ctx))
		close(nodeDone)
		require.NoError(t, waitErr(t, allDone, 10*time.Second))
		require.Equal(t, "compiling\nline 1\n"+want.String(), allOut.String(), "every phase, up to the last message")

		var again testutil.Buffer
		require.NoError(t, q.FollowLogs(ctx, "r", "n1", 1, "", false, nil, &again))
		require.Equal(t, allOut.String(), again.String())
	})
}

// TestFollowLogsServerGone: a local run's server stops with its run; a
// follow whose node then ends returns with what it read, instead of waiting
// for a server that will not come back.
func TestFollowLogsServerGone(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv *testutil.NATS) {
		ctx := ctxT(t)
		q := srv.Queue(t, queue.Options{})
		w := q.LogWriter("r", "n1", 1, "run")
		fmt.Fprintln(w, "before the end")
		var out testutil.Buffer
		done := make(chan struct{})
		errc := follow(ctx, q, "", done, &out)
		testutil.Eventually(t, 10*time.Second, "the output so far", func() bool {
			return strings.Contains(out.String(), "before the end")
		})
		srv.Stop()
		close(done)
		require.NoError(t, waitErr(t, errc, 15*time.Second))
		require.Equal(t, "before the end\n", out.String())
	})
}
