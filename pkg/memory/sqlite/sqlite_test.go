package sqlite_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/memory/memorytest"
	"github.com/hpcq/hpcq/pkg/memory/sqlite"
)

func TestConformance(t *testing.T) {
	memorytest.Exercise(t, func(t *testing.T, clock *memorytest.Clock) memory.Store {
		s, err := sqlite.Open(filepath.Join(t.TempDir(), "memory.sqlite"), sqlite.Options{Now: clock.Now})
		require.NoError(t, err)
		return s
	})
}

// TestReopen: everything survives a reopen, the archival index included.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memory.sqlite")
	s, err := sqlite.Open(path, sqlite.Options{})
	require.NoError(t, err)
	_, err = s.Fork(ctx, memory.ForkParams{Branch: "root"})
	require.NoError(t, err)
	_, err = s.Fork(ctx, memory.ForkParams{Branch: "child", Parent: "root"})
	require.NoError(t, err)
	_, _, err = s.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: "child", Text: "vectorize the inner loop", Tags: []string{"insight"}})
	require.NoError(t, err)
	_, err = s.CoreSet(ctx, memory.CoreSetParams{Branch: "root", Key: "k", Value: "v"})
	require.NoError(t, err)
	_, err = s.RecallAppend(ctx, memory.RecallAppendParams{Branch: "child", Event: memory.RecallEvent{Kind: "compile_failed", Payload: "undefined reference"}})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s, err = sqlite.Open(path, sqlite.Options{})
	require.NoError(t, err)
	defer s.Close()
	hits, err := s.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: "child", Query: "vectorize", Tags: []string{"insight"}})
	require.NoError(t, err)
	require.Len(t, hits, 1)
	hits, err = s.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: "root", Query: "vectorize"})
	require.NoError(t, err)
	require.Empty(t, hits)
	evs, err := s.RecallSearch(ctx, memory.RecallSearchParams{Branch: "child", Query: "undefined"})
	require.NoError(t, err)
	require.Len(t, evs, 1, "the recall index is rebuilt at open")
	e, ok, err := s.CoreGet(ctx, memory.CoreKeyParams{Branch: "child", Key: "k"})
	require.NoError(t, err)
	require.False(t, ok, "written in the root after the child's fork")
	_ = e
	_, _, err = s.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: "child", Text: "Vectorize  the inner loop"})
	require.NoError(t, err)
	hits, err = s.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: "child", Query: "vectorize"})
	require.NoError(t, err)
	require.Equal(t, 2, hits[0].Count, "dedup across a reopen")
}

// TestOneWriterProcess: a second Open of the same file is refused while
// the first is open, and allowed after it closes.
func TestOneWriterProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.sqlite")
	s, err := sqlite.Open(path, sqlite.Options{})
	require.NoError(t, err)
	_, err = sqlite.Open(path, sqlite.Options{})
	require.ErrorIs(t, err, sqlite.ErrLocked)
	require.NoError(t, s.Close())
	s, err = sqlite.Open(path, sqlite.Options{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
}

// crashChild is set in the environment of the child process of
// TestCrashLosesNothing.
const crashChild = "HPCQ_TEST_SQLITE_CRASH_CHILD"

// TestCrashLosesNothing: a process that is SIGKILLed in the middle of a
// stream of writes loses none that it acknowledged; the next Open replays
// them from the journal into the file.
func TestCrashLosesNothing(t *testing.T) {
	if path := os.Getenv(crashChild); path != "" {
		crashChildMain(path)
		return
	}
	path := filepath.Join(t.TempDir(), "memory.sqlite")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashLosesNothing$")
	cmd.Env = append(os.Environ(), crashChild+"="+path)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(out)
	acked := -1
	for sc.Scan() {
		n, err := strconv.Atoi(strings.TrimPrefix(sc.Text(), "ack "))
		require.NoError(t, err, sc.Text())
		acked = n
		if acked >= 3000 {
			break
		}
	}
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	// A line may have been written after the last one read.
	for sc.Scan() {
		if n, err := strconv.Atoi(strings.TrimPrefix(sc.Text(), "ack ")); err == nil {
			acked = n
		}
	}
	require.GreaterOrEqual(t, acked, 3000)

	ctx := context.Background()
	s, err := sqlite.Open(path, sqlite.Options{})
	require.NoError(t, err)
	for i := 0; i <= acked; i++ {
		e, ok, err := s.CoreGet(ctx, memory.CoreKeyParams{Branch: "root", Key: fmt.Sprintf("k%d", i)})
		require.NoError(t, err)
		require.True(t, ok, "acknowledged write %d lost", i)
		require.Equal(t, fmt.Sprint(i), e.Value)
	}
	evs, total, err := s.RecallList(ctx, memory.RecallListParams{Branch: "root", Total: true})
	require.NoError(t, err)
	require.GreaterOrEqual(t, total, acked+1)
	require.Equal(t, "e0", evs[0].Payload)
	// The replay is in the file, and the journal is empty.
	require.NoError(t, s.Flush(ctx))
	require.GreaterOrEqual(t, countRows(t, path, `SELECT COUNT(*) FROM mem_core`), acked+1, "core rows in the file")
	fi, err := os.Stat(path + ".journal")
	require.NoError(t, err)
	require.Zero(t, fi.Size())
	require.NoError(t, s.Close())
}

// crashChildMain writes until killed, printing "ack N" after write N is
// acknowledged.
func crashChildMain(path string) {
	ctx := context.Background()
	s, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if _, err := s.Fork(ctx, memory.ForkParams{Branch: "root"}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for i := 0; ; i++ {
		if _, err := s.CoreSet(ctx, memory.CoreSetParams{Branch: "root", Key: fmt.Sprintf("k%d", i), Value: fmt.Sprint(i)}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if _, err := s.RecallAppend(ctx, memory.RecallAppendParams{Branch: "root", Event: memory.RecallEvent{Kind: "run_done", Payload: fmt.Sprintf("e%d", i)}}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("ack %d\n", i)
	}
}

// countRows runs a query on the file through a connection of its own, as
// an outside reader would.
func countRows(t *testing.T, path, query string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	var n int
	require.NoError(t, db.QueryRow(query).Scan(&n))
	return n
}

// TestFlushReachesTheFile: after Flush an outside reader of the file sees
// every acknowledged write.
func TestFlushReachesTheFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memory.sqlite")
	s, err := sqlite.Open(path, sqlite.Options{Sync: true, Run: "r1"})
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Fork(ctx, memory.ForkParams{Branch: "root"})
	require.NoError(t, err)
	for i := range 500 {
		_, _, err := s.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: "root", Text: fmt.Sprintf("fact number %d", i)})
		require.NoError(t, err)
	}
	require.NoError(t, s.Flush(ctx))
	require.Equal(t, 500, countRows(t, path, `SELECT COUNT(*) FROM archival`))
	require.Equal(t, 500, countRows(t, path, `SELECT COUNT(*) FROM archival WHERE run = 'r1' AND doc_len = 3 AND ts LIKE '20%'`), "the results view")
	require.Equal(t, 1, countRows(t, path, `SELECT COUNT(*) FROM mem_branches`))
}

// TestReadOnly: a store opened for reading only beside its writer takes no
// lock and writes nothing (not the file, not the journal), sees what was in
// the file when it was opened, refuses writes, and leaves the writer free.
func TestReadOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "memory.sqlite")
	_, err := sqlite.Open(path, sqlite.Options{ReadOnly: true})
	require.Error(t, err, "no file: nothing to read, and none is made")
	require.NoFileExists(t, path)

	w, err := sqlite.Open(path, sqlite.Options{})
	require.NoError(t, err)
	defer w.Close()
	_, err = w.Fork(ctx, memory.ForkParams{Branch: "root"})
	require.NoError(t, err)
	_, _, err = w.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: "root", Text: "pin threads close to their memory"})
	require.NoError(t, err)
	_, err = w.CoreSet(ctx, memory.CoreSetParams{Branch: "root", Key: "compiler", Value: "gcc 12"})
	require.NoError(t, err)
	require.NoError(t, w.Flush(ctx))

	stat := func() []string {
		var out []string
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range entries {
			fi, err := e.Info()
			require.NoError(t, err)
			if !strings.HasSuffix(e.Name(), "-shm") {
				out = append(out, fmt.Sprintf("%s %d %d", e.Name(), fi.Size(), fi.ModTime().UnixNano()))
			}
		}
		return out
	}
	r, err := sqlite.Open(path, sqlite.Options{ReadOnly: true})
	require.NoError(t, err, "beside the writer, which holds the lock")
	hits, err := r.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: "root", Query: "threads memory"})
	require.NoError(t, err)
	require.Len(t, hits, 1)
	v, ok, err := r.CoreGet(ctx, memory.CoreKeyParams{Branch: "root", Key: "compiler"})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "gcc 12", v.Value)
	_, err = r.Fork(ctx, memory.ForkParams{Branch: "x", Parent: "root"})
	require.ErrorIs(t, err, sqlite.ErrReadOnly)
	_, _, err = r.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: "root", Text: "t"})
	require.ErrorIs(t, err, sqlite.ErrReadOnly)
	require.ErrorIs(t, r.Checkpoint(ctx), sqlite.ErrReadOnly)
	require.NoError(t, r.Flush(ctx))

	// The writer goes on; the reader shows the file as it was at its Open.
	_, err = w.CoreSet(ctx, memory.CoreSetParams{Branch: "root", Key: "compiler", Value: "clang 17"})
	require.NoError(t, err)
	require.NoError(t, w.Flush(ctx))
	v, _, err = r.CoreGet(ctx, memory.CoreKeyParams{Branch: "root", Key: "compiler"})
	require.NoError(t, err)
	require.Equal(t, "gcc 12", v.Value)
	require.NoError(t, r.Close())
	r, err = sqlite.Open(path, sqlite.Options{ReadOnly: true})
	require.NoError(t, err)
	v, _, err = r.CoreGet(ctx, memory.CoreKeyParams{Branch: "root", Key: "compiler"})
	require.NoError(t, err)
	require.Equal(t, "clang 17", v.Value)
	require.NoError(t, r.Close())
	require.NoError(t, w.Close())

	// Readers open and close without writing anything.
	before := stat()
	for range 2 {
		r, err := sqlite.Open(path, sqlite.Options{ReadOnly: true})
		require.NoError(t, err)
		_, err = r.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: "root", Query: "threads"})
		require.NoError(t, err)
		require.NoError(t, r.Close())
	}
	require.Equal(t, before, stat())
}
