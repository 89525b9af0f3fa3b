package image_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/image"
	"github.com/hpcq/hpcq/internal/image/imagetest"
)

// TestStoredImage: an image fetched by digest is unpacked once (a second
// Get fetches nothing), its file gone once unpacked; content that is not
// the digest it was asked by is refused.
func TestStoredImage(t *testing.T) {
	sqfs := imagetest.SquashFS(t, rootfs(t, "hpcq-stored"))
	digest, err := image.FileDigest(context.Background(), sqfs)
	require.NoError(t, err)
	c, err := image.OpenCache(t.TempDir(), 0, nil)
	require.NoError(t, err)
	fetches := 0
	fetch := func(_ context.Context, w io.Writer) error {
		fetches++
		f, err := os.Open(sqfs)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(w, f)
		return err
	}
	for range 2 {
		im, err := c.GetStored(context.Background(), "store:"+digest, digest, fetch)
		require.NoError(t, err)
		require.Equal(t, image.KindSquashFS, im.Kind)
		require.Equal(t, digest, im.Digest)
		data, err := os.ReadFile(filepath.Join(im.Root, "etc/os-release"))
		require.NoError(t, err)
		require.Equal(t, "ID=hpcq-stored\n", string(data))
		left, _ := filepath.Glob(filepath.Join(filepath.Dir(im.Root), ".fetch-*"))
		require.Empty(t, left, "the fetched file is removed once unpacked")
		im.Release()
	}
	require.Equal(t, 1, fetches)

	other := "sha256:" + strings.Repeat("1", 64)
	_, err = c.GetStored(context.Background(), "store:"+other, other, fetch)
	require.True(t, errors.Is(err, image.ErrImage), "%v", err)
	require.Contains(t, err.Error(), "the stored image "+other+" is "+digest)
}
