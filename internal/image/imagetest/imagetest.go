// Package imagetest builds the same root file system as every kind of
// image hpcq reads, with the formats' own tools and libraries: a SquashFS
// file (mksquashfs), a SIF file (apptainer/sif), an OCI image layout and a
// docker save tarball (go-containerregistry; two layers, the second
// removing etc/gone).
package imagetest

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/image/imagebuild"
	"github.com/hpcq/hpcq/internal/testutil"
)

// Images are dir as each kind of image: "dir", "sqfs", "sif", "oci" (a
// layout) and "docker-archive".
func Images(t *testing.T, dir string) map[string]string {
	t.Helper()
	sqfs := SquashFS(t, dir)
	img := OCIImage(t, dir)
	return map[string]string{"dir": dir, "sqfs": sqfs, "sif": SIF(t, sqfs), "oci": OCILayout(t, img), "docker-archive": DockerArchive(t, img)}
}

// SquashFS makes a SquashFS file of dir with mksquashfs.
func SquashFS(t *testing.T, dir string) string {
	t.Helper()
	testutil.RequireBinary(t, "mksquashfs", "scripts/services.sh install squashfs")
	out := filepath.Join(t.TempDir(), "image.sqfs")
	require.NoError(t, imagebuild.BuildSquashFS(context.Background(), dir, out))
	return out
}

// SIF makes a SIF file whose root file system partition is the SquashFS
// file, with the format's library.
func SIF(t *testing.T, sqfs string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "image.sif")
	require.NoError(t, imagebuild.BuildSIF(sqfs, out))
	return out
}

// TarOf is dir as a tar stream (a layer).
func TarOf(t *testing.T, dir string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	require.NoError(t, tw.AddFS(os.DirFS(dir)))
	// AddFS leaves symbolic links out: add them.
	require.NoError(t, filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			return err
		}
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: rel, Linkname: target, Mode: 0o777})
	}))
	require.NoError(t, tw.Close())
	return buf.Bytes()
}

// OCIImage is dir as an image of two layers: the tree, then a whiteout of
// etc/gone.
func OCIImage(t *testing.T, dir string) v1.Image {
	t.Helper()
	base := TarOf(t, dir)
	var wh bytes.Buffer
	tw := tar.NewWriter(&wh)
	require.NoError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "etc/.wh.gone", Mode: 0o644}))
	require.NoError(t, tw.Close())
	var layers []v1.Layer
	for _, b := range [][]byte{base, wh.Bytes()} {
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
		require.NoError(t, err)
		layers = append(layers, l)
	}
	img, err := mutate.AppendLayers(empty.Image, layers...)
	require.NoError(t, err)
	return img
}

// OCILayout writes img as an OCI image layout for this platform.
func OCILayout(t *testing.T, img v1.Image) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "oci")
	require.NoError(t, imagebuild.WriteOCILayout(img, dir))
	return dir
}

// DockerArchive writes img as a docker save tarball.
func DockerArchive(t *testing.T, img v1.Image) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "image.tar")
	tag, err := name.NewTag("hpcq-test:1")
	require.NoError(t, err)
	require.NoError(t, tarball.WriteToFile(out, tag, img))
	return out
}

// LargestBlob is the name (hex digest) of the largest blob of the OCI
// layout at dir: an image's layer, for tests that change one.
func LargestBlob(t *testing.T, dir string) string {
	t.Helper()
	blobs, err := os.ReadDir(filepath.Join(dir, "blobs/sha256"))
	require.NoError(t, err)
	var name string
	var size int64 = -1
	for _, b := range blobs {
		fi, err := b.Info()
		require.NoError(t, err)
		if fi.Size() > size {
			name, size = b.Name(), fi.Size()
		}
	}
	return name
}
