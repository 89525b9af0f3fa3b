package filecache

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGetReadsAgainOnlyWhenChanged(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "result.json")
	reads := 0
	read := func(p string) (any, error) {
		reads++
		data, err := os.ReadFile(p)
		return string(data), err
	}
	_, err := Get(path, "test", read)
	require.True(t, errors.Is(err, fs.ErrNotExist))
	require.NoError(t, os.WriteFile(path, []byte("one"), 0o644))
	for range 3 {
		v, err := Get(path, "test", read)
		require.NoError(t, err)
		require.Equal(t, "one", v)
	}
	require.Equal(t, 1, reads, "read once while unchanged")
	v, err := Get(path, "other", read) // another kind: its own value
	require.NoError(t, err)
	require.Equal(t, "one", v)
	require.Equal(t, 2, reads)

	tmp := path + ".tmp" // replaced as the engine replaces files
	require.NoError(t, os.WriteFile(tmp, []byte("two"), 0o644))
	require.NoError(t, os.Rename(tmp, path))
	v, err = Get(path, "test", read)
	require.NoError(t, err)
	require.Equal(t, "two", v)
	require.NoError(t, os.WriteFile(path, []byte("three!"), 0o644)) // in place
	v, err = Get(path, "test", read)
	require.NoError(t, err)
	require.Equal(t, "three!", v)

	bad := errors.New("unreadable")
	_, err = Get(path, "failing", func(string) (any, error) { return nil, bad })
	require.ErrorIs(t, err, bad)
	v, err = Get(path, "failing", read) // an error is not kept
	require.NoError(t, err)
	require.Equal(t, "three!", v)

	require.NoError(t, os.Remove(path))
	_, err = Get(path, "test", read)
	require.True(t, errors.Is(err, fs.ErrNotExist))
}
