package linelog

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(data)
}

// TestLinesArrive: a line reaches the file once the interval has passed,
// a batch of MaxBatch at once, what waits at Close; writing after Close
// is refused.
func TestLinesArrive(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "calls.jsonl")
	w, err := Open(path, 20*time.Millisecond)
	require.NoError(t, err)
	_, err = w.Write([]byte("one\n"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return read(t, path) == "one\n" }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, w.Close())
	_, err = w.Write([]byte("late\n"))
	require.ErrorIs(t, err, os.ErrClosed)
	require.ErrorIs(t, w.Close(), os.ErrClosed)

	// An interval that never comes: a full batch is written at once, the
	// rest at Close.
	w, err = Open(path, time.Hour)
	require.NoError(t, err)
	line := strings.Repeat("x", 1023) + "\n"
	for range MaxBatch / len(line) {
		_, err = w.Write([]byte(line))
		require.NoError(t, err)
	}
	require.Len(t, read(t, path), len("one\n")+MaxBatch, "a full batch is written without waiting")
	_, err = w.Write([]byte("two\n"))
	require.NoError(t, err)
	require.NotContains(t, read(t, path), "two")
	require.NoError(t, w.Close())
	require.True(t, strings.HasSuffix(read(t, path), line+"two\n"))

	_, err = Open(path, 0)
	require.Error(t, err)
}

// TestSharedFile: two writers appending to one file (two runs sharing a
// log directory) never cut each other's lines.
func TestSharedFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "shared.jsonl")
	var wg sync.WaitGroup
	for k := range 2 {
		w, err := Open(path, time.Millisecond)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3000 {
				_, err := fmt.Fprintf(w, "writer %d line %d %s\n", k, i, strings.Repeat("y", i%200))
				assert.NoError(t, err)
			}
			assert.NoError(t, w.Close())
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(read(t, path), "\n"), "\n")
	require.Len(t, lines, 6000)
	next := [2]int{}
	for _, l := range lines {
		var k, i int
		var pad string
		_, err := fmt.Sscanf(l, "writer %d line %d %s", &k, &i, &pad)
		if i%200 == 0 {
			_, err = fmt.Sscanf(l, "writer %d line %d", &k, &i)
		}
		require.NoError(t, err, l)
		require.Equal(t, next[k], i, "each writer's lines whole and in order")
		require.Equal(t, strings.Repeat("y", i%200), pad)
		next[k]++
	}
}

// TestWriteError: a batch that could not be written is reported once: by
// the Write that wrote it, the next one, or Close.
func TestWriteError(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full to make writes fail:", err)
	}
	w, err := Open("/dev/full", time.Hour)
	require.NoError(t, err)
	_, err = w.Write([]byte("lost\n"))
	require.NoError(t, err)
	require.ErrorIs(t, w.Close(), syscall.ENOSPC)

	w, err = Open("/dev/full", time.Hour)
	require.NoError(t, err)
	_, err = w.Write(make([]byte, MaxBatch))
	require.ErrorIs(t, err, syscall.ENOSPC, "the batch it wrote at once failed")
	_, err = w.Write([]byte("next\n"))
	require.NoError(t, err, "reported once")
	require.ErrorIs(t, w.Close(), syscall.ENOSPC)
}
