package image_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apptainer/sif/v2/pkg/sif"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/image"
	"github.com/hpcq/hpcq/internal/image/imagetest"
	"github.com/hpcq/hpcq/internal/testutil"
)

// grants lists what under root would grant something on the host: a
// setuid or setgid file, a device node other than an overlay whiteout
// (0/0), a FIFO or a socket.
func grants(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		switch m := fi.Mode(); {
		case m&(fs.ModeSetuid|fs.ModeSetgid) != 0:
			out = append(out, p+" "+m.String())
		case m&fs.ModeDevice != 0 && st.Rdev != 0, m&(fs.ModeNamedPipe|fs.ModeSocket) != 0:
			out = append(out, p+" "+m.String())
		}
		return nil
	}))
	return out
}

// hostileRoot is a busybox root with what a hostile image carries: a
// setuid-root and a setgid copy of busybox, devices of the host's memory
// and disk, a FIFO, as mksquashfs's pseudo definitions make them (owned by
// root, mode 0666), and the same as a tar's entries for an OCI image.
func hostileSquashFS(t *testing.T, dir string) string {
	t.Helper()
	testutil.RequireBinary(t, "mksquashfs", "scripts/services.sh install squashfs")
	out := filepath.Join(t.TempDir(), "hostile.sqfs")
	args := []string{dir, out, "-noappend", "-no-progress", "-quiet", "-all-root",
		"-p", "bin/su m 4755 0 0", "-p", "bin/sg m 2755 0 0",
		"-p", "dev/mem c 666 0 0 1 1", "-p", "dev/sda b 666 0 0 8 0", "-p", "dev/loop200 b 666 0 0 7 200", "-p", "run/fifo i 666 0 0 f"}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "run"), 0o755)) // for the FIFO
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bin/su"), []byte("#!/bin/sh\nid\n"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bin/sg"), []byte("#!/bin/sh\nid\n"), 0o755))
	b, err := exec.Command("mksquashfs", args...).CombinedOutput()
	require.NoError(t, err, "%s", b)
	return out
}

// hostileLayer is a layer tar with a setuid-root program, a setgid one and
// device nodes.
func hostileLayer(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []*tar.Header{
		{Typeflag: tar.TypeDir, Name: "bin/", Mode: 0o755},
		{Typeflag: tar.TypeReg, Name: "bin/rootshell", Mode: 0o4755, Size: 3},
		{Typeflag: tar.TypeReg, Name: "bin/groupshell", Mode: 0o2755, Size: 3},
		{Typeflag: tar.TypeDir, Name: "dev/", Mode: 0o755},
		{Typeflag: tar.TypeChar, Name: "dev/mem", Mode: 0o666, Devmajor: 1, Devminor: 1},
		{Typeflag: tar.TypeBlock, Name: "dev/sda", Mode: 0o666, Devmajor: 8},
		{Typeflag: tar.TypeFifo, Name: "dev/fifo", Mode: 0o666},
	} {
		require.NoError(t, tw.WriteHeader(h))
		if h.Size > 0 {
			_, _ = tw.Write([]byte("#!\n"))
		}
	}
	require.NoError(t, tw.Close())
	return buf.Bytes()
}

// TestUnpackGrantsNothing: an image carrying setuid/setgid programs and
// device nodes, as SquashFS, SIF, an OCI layout and a layer fetched from
// another worker, leaves none of them in the cache (unpacked as root, the
// formats' tools would have made them there); the cache's directories are
// the worker's alone; and its programs still run.
func TestUnpackGrantsNothing(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: an unpack as another user makes no device node and keeps no root-owned setuid file anyway")
	}
	dir := rootfs(t, "hostile")
	sqfs := hostileSquashFS(t, dir)
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(hostileLayer(t))), nil
	})
	require.NoError(t, err)
	img, err := mutate.AppendLayers(imagetest.OCIImage(t, dir), l)
	require.NoError(t, err)
	cacheDir := filepath.Join(t.TempDir(), "cache")
	cache, err := image.OpenCache(cacheDir, 0, testutil.Logger(t))
	require.NoError(t, err)
	ctx := context.Background()
	for what, ref := range map[string]string{"sqfs": sqfs, "sif": imagetest.SIF(t, sqfs), "oci": imagetest.OCILayout(t, img)} {
		im, err := cache.Get(ctx, ref)
		require.NoError(t, err, what)
		require.Empty(t, grants(t, im.Root), "%s: nothing in the cache grants anything", what)
		if what != "oci" {
			fi, err := os.Stat(filepath.Join(im.Root, "bin/su"))
			require.NoError(t, err, what)
			require.Equal(t, fs.FileMode(0o755), fi.Mode().Perm(), "%s: the program stays, without its setuid bit", what)
		}
		out, err := exec.Command(filepath.Join(im.Root, "bin/busybox"), "true").CombinedOutput()
		require.NoError(t, err, "%s: %s", what, out)
		fi, err := os.Stat(filepath.Dir(im.Root))
		require.NoError(t, err)
		require.Equal(t, fs.FileMode(0o700), fi.Mode().Perm(), "%s: the entry is the worker's alone", what)
		im.Release()
	}
	fi, err := os.Stat(cacheDir)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o700), fi.Mode().Perm(), "the cache is the worker's alone")

	// A layer fetched from another worker, and one a task left (its upper
	// directory holding a setuid file the task made).
	layer := hostileLayer(t)
	digest := sha(layer)
	info, err := cache.AddLayer(ctx, digest, bytes.NewReader(layer))
	require.NoError(t, err)
	held, err := cache.Layer(ctx, info.Digest)
	require.NoError(t, err)
	require.Empty(t, grants(t, held.Root), "a fetched layer grants nothing")
	held.Release()
	upper := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(upper, "suid"), []byte("x"), 0o755))
	require.NoError(t, os.Chmod(filepath.Join(upper, "suid"), fs.ModeSetuid|0o755))
	sealed, err := cache.SealLayer(ctx, upper, image.SealOptions{UID: 65534, GID: 65534})
	require.NoError(t, err)
	f, err := cache.OpenLayerTar(sealed.Digest)
	require.NoError(t, err)
	defer f.Close()
	tr := tar.NewReader(f)
	h, err := tr.Next()
	require.NoError(t, err)
	require.Equal(t, "suid", h.Name)
	require.Zero(t, h.Mode&0o6000, "a sealed layer carries no setuid bit")
}

// TestOlderEntriesHardened: an entry an older build unpacked (setuid bits
// and devices kept, its meta.json without "hardened") is hardened when the
// cache opens.
func TestOlderEntriesHardened(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a device node")
	}
	cacheDir := t.TempDir()
	entry := filepath.Join(cacheDir, strings.Repeat("a", 64))
	require.NoError(t, os.MkdirAll(filepath.Join(entry, "rootfs/bin"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(entry, "rootfs/bin/su"), []byte("x"), 0o755))
	require.NoError(t, os.Chmod(filepath.Join(entry, "rootfs/bin/su"), fs.ModeSetuid|0o755))
	require.NoError(t, syscall.Mknod(filepath.Join(entry, "rootfs/sda"), syscall.S_IFBLK|0o666, 8<<8))
	require.NoError(t, os.WriteFile(filepath.Join(entry, "meta.json"), []byte(`{"ref":"x","kind":"sqfs","digest":"sha256:`+strings.Repeat("a", 64)+`","bytes":1}`), 0o644))
	_, err := image.OpenCache(cacheDir, 0, testutil.Logger(t))
	require.NoError(t, err)
	require.Empty(t, grants(t, filepath.Join(entry, "rootfs")))
	meta, err := os.ReadFile(filepath.Join(entry, "meta.json"))
	require.NoError(t, err)
	require.Contains(t, string(meta), `"hardened": 1`)
}

// TestImagePolicy: a directory image lies under the site's image
// directories, and is never / (not through a link either) nor a system
// directory; an image file elsewhere is used only when the task's user
// may read it.
func TestImagePolicy(t *testing.T) {
	site := t.TempDir()
	img := filepath.Join(site, "debian")
	require.NoError(t, os.Rename(rootfs(t, "site"), img))
	require.NoError(t, os.Symlink("/", filepath.Join(site, "host")))
	cache, err := image.OpenCache(t.TempDir(), 0, testutil.Logger(t))
	require.NoError(t, err)
	ctx := context.Background()

	_, err = cache.Get(ctx, img)
	require.ErrorIs(t, err, image.ErrImage)
	require.ErrorContains(t, err, "HPCQ_IMAGE_DIRS", "no image directory set: no directory image")
	for _, bad := range []string{"/", "/etc", "/usr", "relative/images"} {
		_, err := image.NewPolicy([]string{bad})
		require.Error(t, err, bad)
	}
	_, err = image.NewPolicy([]string{filepath.Join(site, "host")})
	require.ErrorContains(t, err, "system directory", "a link to / is /")
	p, err := image.NewPolicy([]string{site})
	require.NoError(t, err)
	cache.SetPolicy(p)
	im, err := cache.Get(ctx, img)
	require.NoError(t, err)
	require.Equal(t, img, im.Root)
	im.Release()
	for _, ref := range []string{"/", filepath.Join(site, "host"), "/usr"} {
		_, err := cache.Get(ctx, ref)
		require.ErrorIs(t, err, image.ErrImage, ref)
	}
	_, err = cache.Get(ctx, filepath.Join(site, "host"))
	require.ErrorContains(t, err, "system directory", "the image directory's link to / is refused as /")

	if os.Geteuid() != 0 {
		return
	}
	// An image file only root may read (0600 in a 0700 directory): not
	// for a task running as nobody, unless it lies in an image directory.
	sqfs := imagetest.SquashFS(t, rootfs(t, "private"))
	// Under /tmp itself: a test's own temporary directory is 0700.
	private, err := os.MkdirTemp("", "hpcq-root-only-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(private) })
	require.NoError(t, os.Chmod(private, 0o700))
	secret := filepath.Join(private, "image.sqfs")
	require.NoError(t, os.Rename(sqfs, secret))
	require.NoError(t, os.Chmod(secret, 0o600))
	_, err = cache.GetAs(ctx, secret, 65534, 65534)
	require.ErrorIs(t, err, image.ErrImage)
	require.ErrorContains(t, err, "may not read it")
	require.NoError(t, os.Chmod(private, 0o755))
	_, err = cache.GetAs(ctx, secret, 65534, 65534)
	require.ErrorContains(t, err, "mode 600", "the file itself is root's")
	p, err = image.NewPolicy([]string{site, private})
	require.NoError(t, err)
	cache.SetPolicy(p)
	im, err = cache.GetAs(ctx, secret, 65534, 65534)
	require.NoError(t, err, "the site's own image directory")
	im.Release()

	// A FIFO named as an image is refused, not waited on.
	fifo := filepath.Join(site, "image.sif")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	done := make(chan error, 1)
	go func() { _, err := cache.Get(ctx, fifo); done <- err }()
	select {
	case err := <-done:
		require.ErrorIs(t, err, image.ErrImage)
		require.ErrorContains(t, err, "named pipe")
	case <-time.After(time.Minute):
		t.Fatal("a FIFO named as an image blocked the worker")
	}
}

// TestCorruptSIFReleasesItsLock: a SIF whose header makes the format's
// library panic (a descriptor count it makes a slice of) is an image error
// with the library's words, and the cache entry's lock is released: the
// next attempt, and another worker sharing the cache, get the same error
// instead of waiting forever.
func TestCorruptSIFReleasesItsLock(t *testing.T) {
	sifFile := imagetest.SIF(t, imagetest.SquashFS(t, rootfs(t, "corrupt")))
	data, err := os.ReadFile(sifFile)
	require.NoError(t, err)
	// DescriptorsTotal: after the launch script (32), magic (10), version
	// (3), arch (3), id (16), two times (16).
	binary.LittleEndian.PutUint64(data[80+8:], 1<<62)
	require.NoError(t, os.WriteFile(sifFile, data, 0o644))
	cacheDir := t.TempDir()
	for i := range 3 {
		cache, err := image.OpenCache(cacheDir, 0, testutil.Logger(t)) // a worker each
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { _, err := cache.Get(context.Background(), sifFile); done <- err }()
		select {
		case err := <-done:
			require.ErrorIs(t, err, image.ErrImage, "attempt %d", i)
			require.ErrorContains(t, err, sifFile)
			require.ErrorContains(t, err, "makeslice", "the library's words")
			if i == 0 {
				t.Log(err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("attempt %d waited for a lock a panic left held", i)
		}
	}
}

// TestSIFErrorsNameTheSIF: a SIF whose root file system partition is not
// SquashFS inside fails naming the SIF, not a temporary copy.
func TestSIFErrorsNameTheSIF(t *testing.T) {
	testutil.RequireBinary(t, "unsquashfs", "scripts/services.sh install squashfs")
	garbage := bytes.Repeat([]byte("hsqs garbage "), 4096)
	di, err := sif.NewDescriptorInput(sif.DataPartition, bytes.NewReader(garbage), sif.OptPartitionMetadata(sif.FsSquash, sif.PartPrimSys, runtime.GOARCH))
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), "garbage.sif")
	f, err := sif.CreateContainerAtPath(out, sif.OptCreateWithDescriptors(di))
	require.NoError(t, err)
	require.NoError(t, f.UnloadContainer())
	cache, err := image.OpenCache(t.TempDir(), 0, testutil.Logger(t))
	require.NoError(t, err)
	_, err = cache.Get(context.Background(), out)
	require.ErrorIs(t, err, image.ErrImage)
	require.ErrorContains(t, err, out)
	require.NotContains(t, err.Error(), "rootfs.sqfs", "no temporary file named")
	require.ErrorContains(t, err, "partition")
}

// TestTamperedBlobRefused: an OCI layout whose layer blob was edited in
// place (same file name, so the same manifest digest a run pins) is
// refused, naming the blob.
func TestTamperedBlobRefused(t *testing.T) {
	dir := rootfs(t, "tamper")
	layout := imagetest.OCILayout(t, imagetest.OCIImage(t, dir))
	cache, err := image.OpenCache(t.TempDir(), 0, testutil.Logger(t))
	require.NoError(t, err)
	biggest := imagetest.LargestBlob(t, layout) // the tree's layer
	path := filepath.Join(layout, "blobs/sha256", biggest)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	// A layer holding another tree, compressed alike: what an attacker
	// with write access to the layout would put there.
	other := imagetest.OCILayout(t, imagetest.OCIImage(t, rootfs(t, "planted")))
	planted, err := os.ReadFile(filepath.Join(other, "blobs/sha256", imagetest.LargestBlob(t, other)))
	require.NoError(t, err)
	require.NotEqual(t, data, planted)
	require.NoError(t, os.WriteFile(path, planted, 0o644))
	_, err = cache.Get(context.Background(), layout)
	require.ErrorIs(t, err, image.ErrImage)
	require.ErrorContains(t, err, "sha256:"+biggest, "the blob is named")
	require.ErrorContains(t, err, layout, "the image is named as the task named it")
}

// TestLayoutWithLinksRefused: an OCI layout whose blob is a link (to a
// host file the worker may read) or a FIFO is refused before the library
// opens it.
func TestLayoutWithLinksRefused(t *testing.T) {
	layout := imagetest.OCILayout(t, imagetest.OCIImage(t, rootfs(t, "links")))
	blobs, err := os.ReadDir(filepath.Join(layout, "blobs/sha256"))
	require.NoError(t, err)
	victim := filepath.Join(layout, "blobs/sha256", blobs[0].Name())
	require.NoError(t, os.Remove(victim))
	require.NoError(t, syscall.Mkfifo(victim, 0o644))
	cache, err := image.OpenCache(t.TempDir(), 0, testutil.Logger(t))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { _, err := cache.Get(context.Background(), layout); done <- err }()
	select {
	case err := <-done:
		require.ErrorIs(t, err, image.ErrImage)
		require.ErrorContains(t, err, "named pipe")
	case <-time.After(time.Minute):
		t.Fatal("a FIFO blob blocked the worker")
	}
	require.NoError(t, os.Remove(victim))
	require.NoError(t, os.Symlink("/etc/passwd", victim))
	_, err = cache.Get(context.Background(), layout)
	require.ErrorIs(t, err, image.ErrImage)
	require.ErrorContains(t, err, "symbolic link")
}

// TestHoldsFollowsNoLink: what a layer holds is read inside it: a task's
// dpkg status that is a link to a host file, or a FIFO, and a Python
// directory that is a link out, give nothing of the host and never block.
func TestHoldsFollowsNoLink(t *testing.T) {
	host := t.TempDir()
	secretStatus := "Package: host-secret\nStatus: install ok installed\nVersion: 1\n\n"
	require.NoError(t, os.WriteFile(filepath.Join(host, "status"), []byte(secretStatus), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(host, "site-packages/leaked-1.0.dist-info"), 0o755))

	upper := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(upper, "var/lib/dpkg"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(host, "status"), filepath.Join(upper, "var/lib/dpkg/status")))
	require.NoError(t, os.MkdirAll(filepath.Join(upper, "usr/lib/python3.11"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(host, "site-packages"), filepath.Join(upper, "usr/lib/python3.11/site-packages")))
	require.NoError(t, os.WriteFile(filepath.Join(upper, "usr/lib/x"), []byte("x"), 0o644))
	holds := image.Holds(upper, nil, nil)
	require.NotContains(t, holds, "host-secret")
	require.NotContains(t, holds, "leaked")

	require.NoError(t, os.Remove(filepath.Join(upper, "var/lib/dpkg/status")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(upper, "var/lib/dpkg/status"), 0o644))
	done := make(chan string, 1)
	go func() { done <- image.Holds(upper, nil, nil) }()
	select {
	case h := <-done:
		require.Contains(t, h, "/usr/lib (1)")
	case <-time.After(time.Minute):
		t.Fatal("a FIFO as the dpkg status held the slot")
	}
}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}
