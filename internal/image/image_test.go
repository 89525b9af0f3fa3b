package image_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/image"
	"github.com/hpcq/hpcq/internal/image/imagetest"
	"github.com/hpcq/hpcq/internal/testutil"
)

func rootfs(t *testing.T, id string) string { return testutil.BusyboxRoot(t, id) }

// TestEveryKindGivesTheSameTree: the same root file system as a directory,
// SquashFS, SIF, an OCI layout and a docker save tarball resolves to the
// same files; the unpacked ones are cached by digest and unpacked once.
func TestEveryKindGivesTheSameTree(t *testing.T) {
	dir := rootfs(t, "hpcq-test")
	sqfs := imagetest.SquashFS(t, dir)
	img := imagetest.OCIImage(t, dir)
	refs := map[string]string{
		image.KindDir:      dir,
		image.KindSquashFS: sqfs,
		image.KindSIF:      imagetest.SIF(t, sqfs),
		image.KindOCI:      imagetest.OCILayout(t, img),
		"docker-archive":   imagetest.DockerArchive(t, img),
	}
	cache, err := image.OpenCache(t.TempDir(), 0, testutil.Logger(t))
	require.NoError(t, err)
	policy, err := image.NewPolicy([]string{filepath.Dir(dir)})
	require.NoError(t, err)
	cache.SetPolicy(policy)
	ctx := context.Background()
	for what, ref := range refs {
		kind, err := image.KindOf(ref)
		require.NoError(t, err, what)
		if what == "docker-archive" {
			require.Equal(t, image.KindOCI, kind)
		} else {
			require.Equal(t, what, kind)
		}
		im, err := cache.Get(ctx, ref)
		require.NoError(t, err, what)
		osr, err := os.ReadFile(filepath.Join(im.Root, "etc/os-release"))
		require.NoError(t, err, what)
		require.Equal(t, "ID=hpcq-test\n", string(osr), what)
		fi, err := os.Stat(filepath.Join(im.Root, "bin/busybox"))
		require.NoError(t, err, what)
		require.NotZero(t, fi.Mode()&0o111, "%s: busybox stays executable", what)
		link, err := os.Readlink(filepath.Join(im.Root, "bin/sh"))
		require.NoError(t, err, what)
		require.Equal(t, "busybox", link, what)
		_, gone := os.Stat(filepath.Join(im.Root, "etc/gone"))
		if kind == image.KindOCI {
			require.ErrorIs(t, gone, os.ErrNotExist, "%s: the second layer's whiteout applies", what)
		} else {
			require.NoError(t, gone, what)
		}
		out, err := exec.Command(filepath.Join(im.Root, "bin/busybox"), "cat", filepath.Join(im.Root, "etc/os-release")).Output()
		require.NoError(t, err, what)
		require.Equal(t, "ID=hpcq-test\n", string(out), what)
		if kind == image.KindDir {
			require.Equal(t, dir, im.Root, "a directory is used where it is")
			require.Empty(t, im.Digest)
		} else {
			require.True(t, strings.HasPrefix(im.Digest, "sha256:"), im.Digest)
			again, err := cache.Get(ctx, ref)
			require.NoError(t, err)
			require.Equal(t, im.Root, again.Root, "%s: unpacked once", what)
			again.Release()
		}
		im.Release()
	}
	layoutIm, err := cache.Get(ctx, refs[image.KindOCI])
	require.NoError(t, err)
	archIm, err := cache.Get(ctx, refs["docker-archive"])
	require.NoError(t, err)
	require.Equal(t, layoutIm.Digest, archIm.Digest, "the same image by its manifest's digest, whatever holds it")
	layoutIm.Release()
	archIm.Release()
}

// TestCacheEvictsLeastRecentlyUsed: past its bound the cache removes the
// least recently used tree that no one holds, never one in use.
func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	a, b := imagetest.SquashFS(t, rootfs(t, "a")), imagetest.SquashFS(t, rootfs(t, "b"))
	cache, err := image.OpenCache(t.TempDir(), 1, testutil.Logger(t)) // 1 byte: every image is over it
	require.NoError(t, err)
	ctx := context.Background()
	ia, err := cache.Get(ctx, a)
	require.NoError(t, err)
	ib, err := cache.Get(ctx, b)
	require.NoError(t, err)
	_, err = os.Stat(ia.Root)
	require.NoError(t, err, "a is in use: kept")
	ia.Release()
	ib.Release()
	ia2, err := cache.Get(ctx, a) // b, released and the older, goes
	require.NoError(t, err)
	defer ia2.Release()
	_, err = os.Stat(ib.Root)
	require.ErrorIs(t, err, os.ErrNotExist, "b evicted")
	_, err = os.Stat(filepath.Join(ia2.Root, "bin/busybox"))
	require.NoError(t, err)
}

// TestNotAnImage: what is not an image is refused with what was looked for.
func TestNotAnImage(t *testing.T) {
	dir := t.TempDir()
	_, err := image.KindOf(dir)
	require.ErrorIs(t, err, image.ErrImage)
	require.ErrorContains(t, err, "oci-layout")
	file := filepath.Join(dir, "x.img")
	require.NoError(t, os.WriteFile(file, []byte("not an image"), 0o644))
	_, err = image.KindOf(file)
	require.ErrorIs(t, err, image.ErrImage)
	_, err = image.KindOf(filepath.Join(dir, "missing.sif"))
	require.ErrorIs(t, err, image.ErrImage)
}

// TestTarEntriesStayInside: a layer whose entries climb out (a "../"
// name; an absolute link, then a file written through it) writes nothing
// outside the tree: go-containerregistry refuses the first and drops the
// second's file (untar's own refusal is TestUntarStaysInside).
func TestTarEntriesStayInside(t *testing.T) {
	outside := t.TempDir()
	for what, headers := range map[string][]*tar.Header{
		"a ../ name": {{Typeflag: tar.TypeDir, Name: "bin/", Mode: 0o755}, {Typeflag: tar.TypeReg, Name: "../escape", Mode: 0o644, Size: 1}},
		"a file through an absolute link": {{Typeflag: tar.TypeSymlink, Name: "out", Linkname: outside, Mode: 0o777},
			{Typeflag: tar.TypeReg, Name: "out/planted", Mode: 0o644, Size: 1}},
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
		b := buf.Bytes()
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
		require.NoError(t, err)
		img, err := mutate.AppendLayers(empty.Image, l)
		require.NoError(t, err)
		cache, err := image.OpenCache(t.TempDir(), 0, testutil.Logger(t))
		require.NoError(t, err)
		im, err := cache.Get(context.Background(), imagetest.OCILayout(t, img))
		if what == "a ../ name" {
			require.ErrorIs(t, err, image.ErrImage, what)
		} else {
			require.NoError(t, err, what)
			im.Release()
		}
		_, err = os.Stat(filepath.Join(outside, "planted"))
		require.ErrorIs(t, err, os.ErrNotExist, "%s: nothing planted outside", what)
		_, err = os.Stat(filepath.Join(filepath.Dir(outside), "escape"))
		require.ErrorIs(t, err, os.ErrNotExist, what)
	}
}
