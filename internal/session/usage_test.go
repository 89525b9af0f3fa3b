package session

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/runview"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// TestUsageSaver: the first save writes at once; saves within usageEvery
// are folded into one write of the latest usage when it has passed; flush
// writes at once.
func TestUsageSaver(t *testing.T) {
	dir := t.TempDir()
	path := rundir.Dir(dir).Path(rundir.UsageFile)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	var calls atomic.Int64
	s := &usageSaver{path: path, usage: func() llm.Usage { return llm.Usage{Calls: calls.Load()} }, log: testutil.Logger(t)}
	read := func() int64 {
		u, err := runview.ReadUsage(dir)
		require.NoError(t, err)
		return u.Calls
	}
	calls.Store(1)
	s.save()
	require.EqualValues(t, 1, read(), "the first save writes at once")
	calls.Store(2)
	s.save()
	calls.Store(3)
	s.save()
	require.EqualValues(t, 1, read(), "saves within usageEvery wait")
	testutil.Eventually(t, 3*usageEvery, "the pending save written", func() bool { return read() == 3 })
	calls.Store(4)
	s.save()
	s.flush()
	require.EqualValues(t, 4, read(), "flush writes at once")
	time.Sleep(usageEvery + 100*time.Millisecond) //nolint:forbidigo // a period must pass to show nothing more is written
	require.EqualValues(t, 4, read())
}
