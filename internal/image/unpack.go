package image

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/apptainer/sif/v2/pkg/sif"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/hpcq/hpcq/internal/fileio"
)

// unsquash unpacks the SquashFS file at path into dest (which must not
// exist) with unsquashfs; extended attributes are left out (a security
// label of the image's build machine means nothing here, a file
// capability must not be granted). Errors name the image as name (a SIF's
// partition is copied to a temporary file first).
func unsquash(ctx context.Context, name, path, dest string) error {
	bin, err := exec.LookPath("unsquashfs")
	if err != nil {
		return errors.New("image: unsquashfs not found: install squashfs-tools (scripts/services.sh install squashfs)")
	}
	out, err := exec.CommandContext(ctx, bin, "-n", "-no-xattrs", "-d", dest, path).CombinedOutput()
	if err != nil {
		detail := lastLines(strings.ReplaceAll(string(out), path, name), 5)
		if name != path {
			detail = "its root file system partition: " + detail
		}
		return fmt.Errorf("%w: %s: unsquashfs: %w: %s", ErrImage, name, err, detail)
	}
	return nil
}

// unpackSIF unpacks the root file system partition of the SIF file at
// path (a SquashFS one of this machine's architecture) into dest, through
// a copy of the partition in tmp.
func unpackSIF(ctx context.Context, path, dest, tmp string) (err error) {
	defer guard(path, &err)
	f, err := sif.LoadContainerFromPath(path, sif.OptLoadWithFlag(os.O_RDONLY))
	if err != nil {
		return fmt.Errorf("%w: %s: not a SIF file: %w", ErrImage, path, err)
	}
	defer func() { _ = f.UnloadContainer() }()
	d, err := f.GetDescriptor(sif.WithPartitionType(sif.PartPrimSys))
	if err != nil {
		return fmt.Errorf("%w: %s: no root file system partition: %w", ErrImage, path, err)
	}
	fsType, _, arch, err := d.PartitionMetadata()
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrImage, path, err)
	}
	if fsType != sif.FsSquash {
		return fmt.Errorf("%w: %s: its root file system is %s, not SquashFS (an ext3 or encrypted partition is not supported)", ErrImage, path, fsType)
	}
	if want := sifArch(runtime.GOARCH); arch != "" && arch != want {
		return fmt.Errorf("%w: %s: built for %s, this machine is %s", ErrImage, path, arch, want)
	}
	part := filepath.Join(tmp, "rootfs.sqfs")
	out, err := os.Create(part)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, readerCtx{ctx, d.GetReader()})
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("image: %s: copy its partition: %w", path, err)
	}
	defer os.Remove(part)
	return unsquash(ctx, path, part, dest)
}

// sifArch is SIF's name of a Go architecture.
func sifArch(goarch string) string {
	switch goarch {
	case "arm64":
		return "arm64"
	case "ppc64le":
		return "ppc64le"
	}
	return goarch
}

// ociImage opens the image of an OCI layout directory, an OCI layout in a
// tar, or a docker save tarball: the one for this machine's platform when
// an index holds several. cleanup removes what was unpacked to read it.
func ociImage(_ context.Context, path string) (v1.Image, func(), error) {
	noop := func() {}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, noop, fmt.Errorf("%w: %s: %w", ErrImage, path, err)
	}
	if fi.IsDir() {
		img, err := layoutImage(path)
		return img, noop, err
	}
	if img, err := tarball.ImageFromPath(path, nil); err == nil {
		if _, err := img.Manifest(); err == nil {
			return archiveImage{img}, noop, nil
		}
	}
	// An OCI layout in a tar (what `podman save --format oci-archive` and
	// `skopeo copy oci-archive:` write).
	dir, err := os.MkdirTemp("", "hpcq-oci-")
	if err != nil {
		return nil, noop, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	f, err := os.Open(path)
	if err != nil {
		cleanup()
		return nil, noop, fmt.Errorf("%w: %s: %w", ErrImage, path, err)
	}
	defer f.Close()
	if err := untar(f, dir); err != nil {
		cleanup()
		return nil, noop, fmt.Errorf("%w: %s: neither a docker save tarball nor an OCI layout in a tar: %w", ErrImage, path, err)
	}
	img, err := layoutImage(dir)
	if err != nil {
		cleanup()
		return nil, noop, fmt.Errorf("%w: %s: neither a docker save tarball nor an OCI layout in a tar: %w", ErrImage, path, err)
	}
	return img, cleanup, nil
}

// layoutImage is the image of an OCI layout for this machine's platform.
func layoutImage(dir string) (v1.Image, error) {
	if err := plainTree(dir); err != nil {
		return nil, fmt.Errorf("%w: %s: not an OCI image layout: %w", ErrImage, dir, err)
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: not an OCI image layout: %w", ErrImage, dir, err)
	}
	return pickImage(idx, dir)
}

// plainTree says why the tree at dir is not only directories and regular
// files: the library reads a layout's files by name, following links, and
// a link (to a host file) or a FIFO (an open that never returns) is never
// what a layout writes.
func plainTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if t := d.Type(); !t.IsDir() && !t.IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			return fmt.Errorf("%s is %s", rel, fileio.TypeName(t))
		}
		return nil
	})
}

// pickImage is the index's image for linux on this architecture (or one
// without a platform), descending into nested indexes.
func pickImage(idx v1.ImageIndex, where string) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrImage, where, err)
	}
	var seen []string
	for _, d := range m.Manifests {
		p := d.Platform
		if p != nil && (p.OS != "linux" || p.Architecture != runtime.GOARCH) {
			seen = append(seen, p.OS+"/"+p.Architecture)
			continue
		}
		if d.MediaType.IsIndex() {
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrImage, where, err)
			}
			return pickImage(child, where)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrImage, where, err)
		}
		return img, nil
	}
	return nil, fmt.Errorf("%w: %s holds no image for linux/%s (it has: %s)", ErrImage, where, runtime.GOARCH, strings.Join(seen, ", "))
}

// unpackOCI flattens the image's layers (whiteouts applied) into dest,
// once every blob is checked against its digest.
func unpackOCI(ctx context.Context, path, dest, _ string) error {
	img, cleanup, err := ociImage(ctx, path)
	if err != nil {
		return err
	}
	defer cleanup()
	if err := verifyBlobs(ctx, img); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrImage, path, err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return err
	}
	if err := untar(readerCtx{ctx, rc}, dest); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrImage, path, err)
	}
	// mutate.Extract writes the tar's end before it closes the pipe with
	// its error (an entry named "../x" it refuses, a layer that does not
	// read): the error comes after the end the tar reader stops at.
	if _, err := io.Copy(io.Discard, rc); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrImage, path, err)
	}
	return nil
}

// untar writes the tar stream r under dest through an os.Root, so that no
// entry (a "../" name, a link pointing out) can write outside it. Regular
// files, directories, symbolic and hard links are written; device nodes
// and FIFOs are left out (a task's /dev is the host's, bound in), and so
// are setuid and setgid bits (harden.go). Owners are kept when this
// process may set them.
func untar(r io.Reader, dest string) error {
	return untarWith(r, dest, func(string) bool { return false })
}

// untarWith is untar, but for the entries special takes (by their clean
// name), which are not written.
func untarWith(r io.Reader, dest string, special func(name string) bool) error {
	root, err := os.OpenRoot(dest)
	if err != nil {
		return err
	}
	defer root.Close()
	asRoot := os.Geteuid() == 0
	type dirMode struct {
		name string
		mode fs.FileMode
	}
	var dirs []dirMode
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "/"))
		if name == "." || name == ".." || strings.HasPrefix(name, "../") || special(name) {
			continue
		}
		if dir := path.Dir(name); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		mode := fs.FileMode(h.Mode) & fs.ModePerm
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			dirs = append(dirs, dirMode{name, fs.FileMode(h.Mode) & (fs.ModePerm | fs.ModeSticky)})
		case tar.TypeReg:
			_ = root.Remove(name)
			f, err := root.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_EXCL, mode)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if err := root.Chmod(name, fs.FileMode(h.Mode)&(fs.ModePerm|fs.ModeSticky)); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		case tar.TypeSymlink:
			_ = root.Remove(name)
			if err := root.Symlink(h.Linkname, name); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		case tar.TypeLink:
			_ = root.Remove(name)
			if err := root.Link(path.Clean(strings.TrimPrefix(h.Linkname, "/")), name); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		default:
			continue
		}
		if asRoot {
			if err := root.Lchown(name, h.Uid, h.Gid); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	for _, d := range dirs { // last: a read-only directory would refuse its files
		if err := root.Chmod(d.name, d.mode); err != nil {
			return fmt.Errorf("%s: %w", d.name, err)
		}
	}
	return nil
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
