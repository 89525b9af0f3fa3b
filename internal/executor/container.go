package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/hpcq/hpcq/internal/image"
	"github.com/hpcq/hpcq/pkg/schema"
)

// ImagesConfig is where a worker keeps the images its tasks name,
// unpacked (HPCQ_IMAGE_CACHE, HPCQ_IMAGE_CACHE_MB).
type ImagesConfig struct {
	// Dir is the cache's directory, on node-local disk; "" puts it in the
	// runs directory's .images.
	Dir string
	// MaxMB bounds the unpacked trees; the least recently used go first
	// (0: unbounded).
	MaxMB int
	// Log receives what the cache does (an image unpacked, one evicted).
	Log *slog.Logger
}

// imageOf resolves the image task t names: the worker's problem when the
// cache cannot be opened, the task's (ErrKindImage) when the image cannot
// be used. The image is held until released.
func (e *Executor) imageOf(ctx context.Context, t *schema.NodeTask) (*image.Image, *schema.ResultError, error) {
	fail := func(format string, a ...any) (*image.Image, *schema.ResultError, error) {
		return nil, &schema.ResultError{Phase: schema.PhaseCoding, Kind: schema.ErrKindImage, Message: fmt.Sprintf(format, a...)}, nil
	}
	if e.sandbox == nil {
		return fail("the task runs in the image %s, and this worker runs commands without namespaces (%s): a container needs them", t.Container.Image, e.isolation)
	}
	cache, err := e.imageCache()
	if err != nil {
		return nil, nil, err
	}
	im, err := cache.Get(ctx, t.Container.Image)
	switch {
	case errors.Is(err, image.ErrImage):
		return fail("%v", err)
	case err != nil:
		return nil, nil, err
	}
	if want := t.Container.Digest; want != "" && im.Digest != "" && im.Digest != want {
		im.Release()
		return fail("the image %s is %s here, the task names %s: not run in another image than the run's", t.Container.Image, im.Digest, want)
	}
	return im, nil, nil
}

// containerRoot is the root file system task t's commands run in ("":
// the host's) and what releases its image; a task whose image cannot be
// used gets res.Error, a worker's failure the error.
func (e *Executor) containerRoot(ctx context.Context, t *schema.NodeTask, res *schema.NodeResult) (string, func(), error) {
	if t.Container == nil {
		return "", func() {}, nil
	}
	im, rerr, err := e.imageOf(ctx, t)
	if err != nil || rerr != nil {
		res.Error = rerr
		return "", func() {}, err
	}
	res.Container = &schema.ContainerUsed{Image: t.Container.Image, Kind: im.Kind, Digest: im.Digest, Runtime: "hpcq"}
	return im.Root, im.Release, nil
}

// imageCache opens the images' cache on the first task that names one.
func (e *Executor) imageCache() (*image.Cache, error) {
	e.imagesMu.Lock()
	defer e.imagesMu.Unlock()
	if e.images != nil {
		return e.images, nil
	}
	dir := e.cfg.Images.Dir
	if dir == "" {
		dir = filepath.Join(e.cfg.RunsDir, ".images")
	}
	c, err := image.OpenCache(dir, int64(e.cfg.Images.MaxMB)<<20, e.cfg.Images.Log)
	if err != nil {
		return nil, err
	}
	e.images = c
	return c, nil
}
