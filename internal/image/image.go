// Package image turns the container image a run or a task names into a
// root file system on this machine. A directory holding a root file system
// is used where it is; a SquashFS file, an Apptainer/Singularity SIF file,
// an OCI image layout (a directory, or one in a tar) and a `docker save`
// tarball are unpacked once into a cache kept by digest on node-local disk
// (HPCQ_IMAGE_CACHE), least recently used out first past its size bound.
//
// The formats are read with their own libraries: SIF with
// github.com/apptainer/sif (the format's library: it finds the root file
// system's partition), OCI and docker archives with
// github.com/google/go-containerregistry (it flattens the layers, whiteouts
// included), SquashFS with squashfs-tools' unsquashfs (Debian
// squashfs-tools), the tool Apptainer itself uses to unpack one.
package image

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/hpcq/hpcq/internal/fileio"
)

// Kinds of image.
const (
	KindDir      = "dir"  // a directory holding a root file system
	KindSquashFS = "sqfs" // a SquashFS file
	KindSIF      = "sif"  // an Apptainer/Singularity SIF file
	KindOCI      = "oci"  // an OCI image layout (directory or tar) or a docker save tarball
)

// ErrImage is wrapped by every error about an image itself (missing,
// of no known kind, damaged); an error without it is the machine's.
var ErrImage = errors.New("image")

// Image is a resolved image.
type Image struct {
	// Ref is the image as named (a path).
	Ref  string
	Kind string
	// Digest is "sha256:<hex>": of the file (SquashFS, SIF), of the image's
	// manifest (OCI); "" for a directory, used in place.
	Digest string
	// Root is the root file system's directory.
	Root string

	release func()
}

// Release lets the cache remove the image's unpacked tree again (it is
// kept from eviction while held).
func (im *Image) Release() {
	if im.release != nil {
		im.release()
		im.release = nil
	}
}

// sifMagic is at offset 32 of a SIF file (after its launch script line);
// squashfsMagic at offset 0 of a SquashFS one; a tar's "ustar" at 257.
var (
	sifMagic      = []byte("SIF_MAGIC")
	squashfsMagic = []byte("hsqs")
	tarMagic      = []byte("ustar")
)

// KindOf tells what the image at path is.
func KindOf(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrImage, path, err)
	}
	if fi.IsDir() {
		if _, err := os.Stat(filepath.Join(path, "oci-layout")); err == nil {
			return KindOCI, nil
		}
		for _, p := range []string{"bin", "usr/bin"} {
			if st, err := os.Stat(filepath.Join(path, p)); err == nil && st.IsDir() {
				return KindDir, nil
			}
		}
		return "", fmt.Errorf("%w: %s is a directory with neither an oci-layout file nor a root file system (bin/, usr/bin/)", ErrImage, path)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s is %s, not an image file", ErrImage, path, fileio.TypeName(fi.Mode()))
	}
	// Not blocking, and checked again on the descriptor: what is named may
	// be swapped for a FIFO after the stat.
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrImage, path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s is not a regular file", ErrImage, path)
	}
	head := make([]byte, 512)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return "", fmt.Errorf("%w: %s: %w", ErrImage, path, err)
	}
	head = head[:n]
	switch {
	case len(head) >= 32+len(sifMagic) && bytes.Equal(head[32:32+len(sifMagic)], sifMagic):
		return KindSIF, nil
	case bytes.HasPrefix(head, squashfsMagic):
		return KindSquashFS, nil
	case len(head) >= 257+len(tarMagic) && bytes.Equal(head[257:257+len(tarMagic)], tarMagic):
		return KindOCI, nil
	}
	return "", fmt.Errorf("%w: %s is none of: a root file system directory, SquashFS, SIF, an OCI layout or docker save tar", ErrImage, path)
}
