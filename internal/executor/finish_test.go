package executor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/schema"
)

// TestFinishDeadline: what follows a task's last phase is bounded by the
// worker's finish deadline. Past it the slot is let go at once: the
// result keeps what the run produced (its metrics, its outputs found) and
// says that the plots and uploads were left, and why.
func TestFinishDeadline(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	q := testutil.StartNATS(t, "embedded").Queue(t, queue.Options{})
	st, err := q.Artifacts(context.Background())
	require.NoError(t, err)
	e, err := NewExecutor(Config{RunsDir: t.TempDir(), KillGrace: 200 * time.Millisecond, ArtifactStore: st, FinishTimeout: time.Nanosecond})
	require.NoError(t, err)
	task := &schema.NodeTask{V: 1, RunID: "r1", NodeID: "late", Attempt: 1, Pool: "cpu", Artifacts: schema.Artifacts{
		Run: schema.RunPhase{Commands: []string{`mkdir -p a/b && printf '\211PNG\r\n\032\n' > a/b/plot.png && echo done > out.txt && echo 'METRIC score=7'`},
			ExpectedOutputs: []string{"out.txt"}}}}
	res := executeWithin(t, e, task, 30*time.Second)
	require.Nil(t, res.Error)
	require.Equal(t, 7.0, res.Metrics["score"])
	require.Equal(t, []string{"out.txt"}, res.OutputsFound)
	require.Empty(t, res.Artifacts)
	require.Contains(t, res.ArtifactsNote, "plots: the walk stopped after 0 entries (breadth first, at depth 0): out of time")
	require.Contains(t, res.ArtifactsNote, "the task's finish deadline (1ns after its last phase, HPCQ_TASK_FINISH_TIMEOUT) passed")
	t.Log(res.ArtifactsNote)

	// With the default deadline the same task brings its files home.
	e.cfg.FinishTimeout = 5 * time.Minute
	task.NodeID = "in-time"
	res = executeWithin(t, e, task, 30*time.Second)
	var names []string
	for _, a := range res.Artifacts {
		names = append(names, a.Name)
	}
	require.Contains(t, names, "a/b/plot.png")
	require.Contains(t, names, "out.txt")
	require.NotContains(t, res.ArtifactsNote, "finish deadline")
}

// TestPlotWalkSkipsUnreadable: a directory the worker may not read (a
// worker that is not root, a task that made one mode 000) is skipped with
// a note; the walk goes on and finds the plots beside and below others.
// The walk runs on a thread without the capabilities that let root read
// any directory (capabilities are per thread; the thread is discarded).
func TestPlotWalkSkipsUnreadable(t *testing.T) {
	ws := t.TempDir()
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(ws, "closed"), 0o755) })
	for _, d := range []string{"closed/inner", "open/deeper"} {
		require.NoError(t, os.MkdirAll(filepath.Join(ws, d), 0o755))
	}
	for _, f := range []string{"closed/inner/hidden.png", "open/deeper/b.png", "a.svg", "z.png"} {
		require.NoError(t, os.WriteFile(filepath.Join(ws, f), []byte("x"), 0o644))
	}
	require.NoError(t, os.Chmod(filepath.Join(ws, "closed"), 0))
	type walk struct {
		plots []string
		note  string
		err   error
	}
	done := make(chan walk, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := dropDACCaps(); err != nil {
			done <- walk{err: err}
			return
		}
		plots, note := findPlots(context.Background(), ws, nil)
		done <- walk{plots: plots, note: note}
	}()
	w := <-done
	require.NoError(t, w.err)
	require.Equal(t, []string{"a.svg", "z.png", "open/deeper/b.png"}, w.plots)
	require.Equal(t, "plots: 1 unreadable directories skipped", w.note)
}

// dropDACCaps takes CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH out of the
// calling thread's effective set (a no-op for a user without them).
func dropDACCaps() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	data[0].Effective &^= 1<<unix.CAP_DAC_OVERRIDE | 1<<unix.CAP_DAC_READ_SEARCH
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}
