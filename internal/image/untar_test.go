package image

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestUntarStaysInside: entries that would write outside the tree through
// a link are refused by the os.Root every write goes through.
func TestUntarStaysInside(t *testing.T) {
	outside := t.TempDir()
	for what, headers := range map[string][]*tar.Header{
		"a file through an absolute link": {{Typeflag: tar.TypeSymlink, Name: "out", Linkname: outside, Mode: 0o777},
			{Typeflag: tar.TypeReg, Name: "out/planted", Mode: 0o644, Size: 1}},
		"a file through a relative link": {{Typeflag: tar.TypeSymlink, Name: "up", Linkname: "../..", Mode: 0o777},
			{Typeflag: tar.TypeReg, Name: "up/planted", Mode: 0o644, Size: 1}},
		"a hard link to a file outside": {{Typeflag: tar.TypeLink, Name: "passwd", Linkname: "../../../../etc/passwd", Mode: 0o644}},
	} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, h := range headers {
			require.NoError(t, tw.WriteHeader(h))
			if h.Size > 0 {
				_, _ = tw.Write([]byte("x"))
			}
		}
		require.NoError(t, tw.Close())
		dest := t.TempDir()
		require.Error(t, untar(&buf, dest), what)
		_, err := os.Stat(filepath.Join(outside, "planted"))
		require.ErrorIs(t, err, os.ErrNotExist, what)
		_, err = os.Stat(filepath.Join(filepath.Dir(dest), "planted"))
		require.ErrorIs(t, err, os.ErrNotExist, what)
	}
}
