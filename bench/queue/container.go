package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hpcq/hpcq/internal/image"
	"github.com/hpcq/hpcq/internal/image/imagebuild"
	"github.com/hpcq/hpcq/pkg/schema"
)

// benchContainer times n no-op tasks run in an image of each kind against
// the same tasks on the bare host, rounds alternating, through the same
// worker and executor (the images unpacked before the timing: a worker
// unpacks an image once per digest):
//
//	bench-queue container image=<dir|sqfs|sif|oci> n=<int> hpcq_s=<f> plain_s=<f> ratio=<f>
//
// The image is a minimal root file system around Debian's busybox-static;
// without it, or without namespaces, the part says why on stderr and prints
// no line.
func benchContainer(p params, out, log io.Writer) error {
	tmp, err := os.MkdirTemp("", "hpcq-bench-images-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	refs, err := benchImages(tmp)
	if err != nil {
		fmt.Fprintf(log, "  container: skipped: %v\n", err)
		return nil
	}
	cacheDir := filepath.Join(tmp, "cache")
	cache, err := image.OpenCache(cacheDir, 0, quiet())
	if err != nil {
		return err
	}
	// The benchmark's directory is the site's image directory.
	policy, err := image.NewPolicy([]string{tmp})
	if err != nil {
		return err
	}
	cache.SetPolicy(policy)
	for _, kind := range []string{image.KindDir, image.KindSquashFS, image.KindSIF, image.KindOCI} {
		im, err := cache.Get(context.Background(), refs[kind])
		if err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
		im.Release()
		var hs, ps []float64
		for r := range p.Reps {
			c := &schema.Container{Image: refs[kind]}
			h, err := spawnHpcq(spawnRun{n: p.ContainerN, cmd: "true", rep: r, isolation: p.Isolation, container: c, imageCache: cacheDir, imageDirs: []string{tmp}}, log)
			if err != nil {
				return fmt.Errorf("%s: %w", kind, err)
			}
			pl, err := spawnHpcq(spawnRun{n: p.ContainerN, cmd: "true", rep: r, isolation: p.Isolation}, io.Discard)
			if err != nil {
				return err
			}
			hs, ps = append(hs, h), append(ps, pl)
			fmt.Fprintf(log, "  container %s round %d: in the image %.3f s, on the host %.3f s, ratio %.3f\n", kind, r+1, h, pl, h/pl)
		}
		h, pl := median(hs), median(ps)
		fmt.Fprintf(out, "bench-queue container image=%s n=%d hpcq_s=%.3f plain_s=%.3f ratio=%.3f\n", kind, p.ContainerN, h, pl, h/pl)
	}
	return nil
}

// benchImages builds the benchmark's image in dir as each kind.
func benchImages(dir string) (map[string]string, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the sandbox's mounts need a worker running as root here")
	}
	bb, err := imagebuild.StaticBusybox()
	if err != nil {
		return nil, err
	}
	root := filepath.Join(dir, "rootfs")
	if err := imagebuild.MinimalRoot(root, bb, "hpcq-bench"); err != nil {
		return nil, err
	}
	refs := map[string]string{image.KindDir: root, image.KindSquashFS: filepath.Join(dir, "image.sqfs"),
		image.KindSIF: filepath.Join(dir, "image.sif"), image.KindOCI: filepath.Join(dir, "oci")}
	if err := imagebuild.BuildSquashFS(context.Background(), root, refs[image.KindSquashFS]); err != nil {
		return nil, err
	}
	if err := imagebuild.BuildSIF(refs[image.KindSquashFS], refs[image.KindSIF]); err != nil {
		return nil, err
	}
	img, err := imagebuild.OCIFromDir(root)
	if err != nil {
		return nil, err
	}
	return refs, imagebuild.WriteOCILayout(img, refs[image.KindOCI])
}
