// Package imagebuild builds images from a root file system directory with
// the formats' own tools and libraries (mksquashfs, apptainer/sif,
// go-containerregistry), and a minimal root from Debian's busybox-static:
// what the tests and benchmarks make their images with. hpcq itself only
// reads images (internal/image).
package imagebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/apptainer/sif/v2/pkg/sif"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/hpcq/hpcq/internal/textcut"
)

// BuildSquashFS writes dir as a SquashFS file with mksquashfs, every file
// owned by root.
func BuildSquashFS(ctx context.Context, dir, out string) error {
	bin, err := exec.LookPath("mksquashfs")
	if err != nil {
		return errors.New("image: mksquashfs not found: install squashfs-tools (scripts/services.sh install squashfs)")
	}
	b, err := exec.CommandContext(ctx, bin, dir, out, "-noappend", "-no-progress", "-quiet", "-all-root").CombinedOutput()
	if err != nil {
		return fmt.Errorf("image: mksquashfs %s: %w: %s", dir, err, textcut.TailLines(strings.TrimSpace(string(b)), 2000))
	}
	return nil
}

// BuildSIF writes a SIF file whose root file system partition is the
// SquashFS file sqfs, for this machine's architecture.
func BuildSIF(sqfs, out string) error {
	f, err := os.Open(sqfs)
	if err != nil {
		return err
	}
	defer f.Close()
	di, err := sif.NewDescriptorInput(sif.DataPartition, f, sif.OptPartitionMetadata(sif.FsSquash, sif.PartPrimSys, runtime.GOARCH))
	if err != nil {
		return fmt.Errorf("image: SIF of %s: %w", sqfs, err)
	}
	img, err := sif.CreateContainerAtPath(out, sif.OptCreateWithDescriptors(di))
	if err != nil {
		return fmt.Errorf("image: SIF of %s: %w", sqfs, err)
	}
	return img.UnloadContainer()
}

// OCIFromDir is dir as an OCI image of one layer (symbolic links kept).
func OCIFromDir(dir string) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		link := ""
		if fi.Mode()&os.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			return err
		}
		return nil
	})
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("image: layer of %s: %w", dir, err)
	}
	data := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		return nil, err
	}
	return mutate.AppendLayers(empty.Image, l)
}

// WriteOCILayout writes img as an OCI image layout in out, for this
// machine's platform.
func WriteOCILayout(img v1.Image, out string) error {
	p, err := layout.Write(out, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendImage(img, layout.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH}))
}

// StaticBusybox is the path of a statically linked busybox (Debian's
// busybox-static), the one program a minimal image needs.
func StaticBusybox() (string, error) {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return "", errors.New("busybox not found (scripts/services.sh install busybox: Debian busybox-static)")
	}
	f, err := elf.Open(bb)
	if err != nil {
		return "", fmt.Errorf("%s: %w", bb, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", fmt.Errorf("%s is not static (install Debian's busybox-static)", bb)
		}
	}
	return bb, nil
}

// MinimalRoot writes a root file system around a static busybox into dir:
// the directories a container needs, the applets as links to busybox, and
// an os-release whose ID is id, the account files and /mnt that
// container runtimes bind onto.
func MinimalRoot(dir, busybox, id string) error {
	for _, d := range []string{"bin", "etc", "tmp", "proc", "dev", "sys", "usr/bin", "mnt"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	data, err := os.ReadFile(busybox)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "bin/busybox"), data, 0o755); err != nil {
		return err
	}
	for _, applet := range []string{"sh", "cat", "ls", "echo", "id", "true", "touch", "grep", "wc"} {
		if err := os.Symlink("busybox", filepath.Join(dir, "bin", applet)); err != nil {
			return err
		}
	}
	for name, text := range map[string]string{"etc/os-release": "ID=" + id + "\n", "etc/passwd": "root:x:0:0:root:/root:/bin/sh\n",
		"etc/group": "root:x:0:\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}
