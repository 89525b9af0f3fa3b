//go:build unix

package fileio

import (
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestOpenRegular: a regular file opens; a named pipe with no writer (which
// would block an open forever), a link in the workspace or out of it, a
// directory and a socket are refused at once, saying what they are.
func TestOpenRegular(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "metrics.json"), []byte(`{"x": 1}`), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "out", "plots"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "out", "plots", "a.png"), []byte("png"), 0o644))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo.json"), 0o644))
	require.NoError(t, os.Symlink("metrics.json", filepath.Join(dir, "inside")))
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(dir, "outside")))
	ln, err := net.Listen("unix", filepath.Join(dir, "sock"))
	require.NoError(t, err)
	defer ln.Close()
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()
	for _, name := range []string{"metrics.json", "out/plots/a.png"} {
		f, fi, err := OpenRegular(root, name)
		require.NoError(t, err, name)
		require.True(t, fi.Mode().IsRegular())
		require.NoError(t, f.Close())
	}
	for name, why := range map[string]string{"fifo.json": "a named pipe", "inside": "a symbolic link", "outside": "a symbolic link",
		"out": "a directory", "sock": "a socket"} {
		done := make(chan error, 1)
		go func() { _, _, err := OpenRegular(root, name); done <- err }()
		select {
		case err := <-done:
			require.ErrorIs(t, err, ErrNotRegular, name)
			require.ErrorContains(t, err, why, name)
		case <-time.After(5 * time.Second):
			t.Fatalf("opening %s blocked", name)
		}
	}
	_, _, err = OpenRegular(root, "../escape")
	require.Error(t, err)
	_, _, err = OpenRegular(root, "missing")
	require.ErrorIs(t, err, fs.ErrNotExist)
}
