package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func collect(t *testing.T, path string) ([]string, *Journal) {
	t.Helper()
	var got []string
	j, err := Open(path, Options{}, func(p []byte) error {
		got = append(got, string(p))
		return nil
	})
	require.NoError(t, err)
	return got, j
}

func TestAppendReopen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "j")
	got, j := collect(t, path)
	require.Empty(t, got)
	for i := range 100 {
		require.NoError(t, j.Append([]byte(fmt.Sprintf("record %d", i))))
	}
	require.NoError(t, j.Append(nil), "an empty record is a record")
	require.NoError(t, j.Close())
	got, j = collect(t, path)
	require.Len(t, got, 101)
	require.Equal(t, "record 0", got[0])
	require.Equal(t, "record 99", got[99])
	require.Equal(t, "", got[100])
	// Appends after a reopen go after the old records.
	require.NoError(t, j.Append([]byte("after")))
	require.NoError(t, j.Close())
	got, j = collect(t, path)
	require.Len(t, got, 102)
	require.Equal(t, "after", got[101])
	require.NoError(t, j.Reset())
	require.Zero(t, j.Size())
	require.NoError(t, j.Close())
	got, j = collect(t, path)
	require.Empty(t, got)
	require.NoError(t, j.Close())
}

// TestTornTail: a crash in the middle of a write leaves a partial frame; Open
// returns the records before it, cuts it off, and appends after the cut.
func TestTornTail(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cut  func(size int64) int64
	}{
		{"header", func(size int64) int64 { return size - 20 + 3 }},
		{"payload", func(size int64) int64 { return size - 5 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j")
			_, j := collect(t, path)
			require.NoError(t, j.Append([]byte("kept")))
			require.NoError(t, j.Append([]byte("twelve bytes")))
			size := j.Size()
			require.NoError(t, j.Close())
			require.NoError(t, os.Truncate(path, tc.cut(size)))
			got, j := collect(t, path)
			require.Equal(t, []string{"kept"}, got)
			require.Equal(t, int64(headerSize+4), j.Size())
			require.NoError(t, j.Append([]byte("next")))
			require.NoError(t, j.Close())
			got, j = collect(t, path)
			require.Equal(t, []string{"kept", "next"}, got)
			require.NoError(t, j.Close())
		})
	}
}

// TestCorruptRecord: a record whose checksum does not match ends the
// journal there.
func TestCorruptRecord(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "j")
	_, j := collect(t, path)
	require.NoError(t, j.Append([]byte("one")))
	require.NoError(t, j.Append([]byte("two")))
	require.NoError(t, j.Close())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	data[len(data)-1] ^= 0xff
	require.NoError(t, os.WriteFile(path, data, 0o644))
	got, j := collect(t, path)
	require.Equal(t, []string{"one"}, got)
	require.NoError(t, j.Close())
}

func TestReplayError(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "j")
	_, j := collect(t, path)
	require.NoError(t, j.Append([]byte("one")))
	require.NoError(t, j.Close())
	boom := errors.New("boom")
	_, err := Open(path, Options{}, func([]byte) error { return boom })
	require.ErrorIs(t, err, boom)
	got, j := collect(t, path)
	require.Equal(t, []string{"one"}, got, "a failed replay keeps the records")
	require.NoError(t, j.Close())
}

func TestTooLarge(t *testing.T) {
	t.Parallel()
	_, j := collect(t, filepath.Join(t.TempDir(), "j"))
	defer j.Close()
	require.ErrorIs(t, j.Append(make([]byte, MaxRecord+1)), ErrTooLarge)
	require.Zero(t, j.Size())
}

func TestConcurrentAppends(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "j")
	_, j := collect(t, path)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 250 {
				if err := j.Append([]byte(fmt.Sprintf("%d/%d", g, i))); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, j.Close())
	got, j := collect(t, path)
	defer j.Close()
	require.Len(t, got, 1000)
	seen := map[string]bool{}
	for _, r := range got {
		require.False(t, seen[r])
		seen[r] = true
	}
}

func TestSync(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "j")
	j, err := Open(path, Options{Sync: true}, nil)
	require.NoError(t, err)
	require.NoError(t, j.Append([]byte("durable")))
	require.NoError(t, j.Close())
	require.Error(t, j.Append([]byte("closed")))
	got, j := collect(t, path)
	require.Equal(t, []string{"durable"}, got)
	require.NoError(t, j.Close())
}

// FuzzOpen: any file content opens without panic, and what Open keeps is a
// prefix of valid frames that survives another open unchanged.
func FuzzOpen(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{3, 0, 0, 0, 0, 0, 0, 0, 'a', 'b', 'c'})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4})
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "j")
		require.NoError(t, os.WriteFile(path, data, 0o644))
		var first []string
		j, err := Open(path, Options{}, func(p []byte) error { first = append(first, string(p)); return nil })
		require.NoError(t, err)
		require.LessOrEqual(t, j.Size(), int64(len(data)))
		require.NoError(t, j.Close())
		var second []string
		j, err = Open(path, Options{}, func(p []byte) error { second = append(second, string(p)); return nil })
		require.NoError(t, err)
		require.NoError(t, j.Close())
		require.Equal(t, first, second)
	})
}

// TestLock: a locked journal cannot be opened with Lock again until its
// holder closes it; a plain Open or Read still can.
func TestLock(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "spool.journal")
	a, err := Open(path, Options{Lock: true}, nil)
	require.NoError(t, err)
	require.NoError(t, a.Append([]byte("one")))
	_, err = Open(path, Options{Lock: true}, nil)
	require.ErrorIs(t, err, ErrLocked)
	require.ErrorContains(t, err, path)
	n := 0
	require.NoError(t, Read(path, func([]byte) error { n++; return nil }))
	require.Equal(t, 1, n)
	require.NoError(t, a.Close())
	b, err := Open(path, Options{Lock: true}, func(p []byte) error { require.Equal(t, "one", string(p)); return nil })
	require.NoError(t, err, "the lock went with its holder")
	require.NoError(t, b.Close())
}
