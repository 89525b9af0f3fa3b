package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hpcq/hpcq/internal/image"
	"github.com/hpcq/hpcq/internal/nsinit"
	"github.com/hpcq/hpcq/pkg/queue"
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
	// LayerStore, when set, is where the layers nodes leave are shared
	// with other workers (queue.Queue.Layers), up to ShareMB each
	// (HPCQ_LAYER_SHARE_MB; 0: DefaultLayerShareMB).
	LayerStore jetstream.ObjectStore
	ShareMB    int
	// ImageStore, when set, holds the images pushed for workers without a
	// shared file system (queue.Queue.Images): a task names one as
	// "store:sha256:<hex>".
	ImageStore jetstream.ObjectStore
	// Dirs are the site's image directories (HPCQ_IMAGE_DIRS): a directory
	// image must lie under one, and an image file elsewhere is used only
	// when the task's user may read it (image.Policy).
	Dirs []string
	// Own are images named by whoever runs the workers (a local run's or
	// exec's own), allowed as if they lay under Dirs.
	Own []string
}

// imageOf resolves the image task t names: the worker's problem when the
// cache cannot be opened, the task's (ErrKindImage) when the image cannot
// be used. The image is held until released.
func (e *Executor) imageOf(ctx context.Context, t *schema.NodeTask, user *TaskUser) (*image.Image, *schema.ResultError, error) {
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
	var im *image.Image
	if d, ok := strings.CutPrefix(t.Container.Image, schema.StoredImagePrefix); ok {
		store := e.cfg.Images.ImageStore
		if store == nil {
			return fail("the image %s was pushed into a cluster's object store, and this worker has none", t.Container.Image)
		}
		im, err = cache.GetStored(ctx, t.Container.Image, d, func(ctx context.Context, w io.Writer) error {
			r, err := store.Get(ctx, queue.ImageObject(d))
			if errors.Is(err, jetstream.ErrObjectNotFound) {
				return fmt.Errorf("%w: not in the object store %s (scheduler image push)", image.ErrImage, queue.ImagesBucket)
			}
			if err != nil {
				return err
			}
			defer r.Close()
			_, err = io.Copy(w, r)
			return err
		})
	} else {
		uid, gid := e.sandbox.containerIDs(user)
		if e.sandbox.uid < 0 {
			uid, gid = -1, -1 // the worker's own user: the kernel checks its reads
		}
		im, err = cache.GetAs(ctx, t.Container.Image, uid, gid)
	}
	switch {
	case errors.Is(err, image.ErrImage) && !strings.Contains(err.Error(), t.Container.Image):
		// The cache names what it read (a link resolved, a stored
		// image's temporary file): the task's own name first.
		return fail("the image %s: %v", t.Container.Image, err)
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

// containerRun is the container a task attempt's commands run in.
type containerRun struct {
	// site, when set, runs the commands instead of the worker's sandbox
	// (container.runtime), given siteImage; no layer is kept then.
	site      *siteRuntime
	siteImage string
	gpus      bool // the task has GPUs (a site runtime binds them)
	// binds are the host's GPU driver files bound in (gpus, hpcq runtime).
	binds []nsinit.Bind

	root     string   // the image's tree
	layers   []string // the layers it starts from, the oldest first: directories of the cache
	scaffold string   // the mount points over them (scaffold.go); "" none
	upper    string   // the attempt's own layer: upper/ and work/, on disk
	held     []*image.Image
}

// release lets the cache evict the image and layers again.
func (c *containerRun) release() {
	if c == nil {
		return
	}
	for _, im := range c.held {
		im.Release()
	}
}

// container is the container task t's commands run in (nil: the host),
// its image and the layers above it held until released; a task whose
// image cannot be used gets res.Error, a worker's failure the error.
func (e *Executor) container(ctx context.Context, t *schema.NodeTask, user *TaskUser, layer *pendingLayer, res *schema.NodeResult) (*containerRun, error) {
	if t.Container == nil {
		return nil, nil
	}
	im, rerr, err := e.imageOf(ctx, t, user)
	if err != nil || rerr != nil {
		res.Error = rerr
		return nil, err
	}
	res.Container = &schema.ContainerUsed{Image: t.Container.Image, Kind: im.Kind, Digest: im.Digest, Runtime: "hpcq"}
	c := &containerRun{root: im.Root, held: []*image.Image{im}}
	if err := e.prepare(ctx, t, im, c, user, layer, res); err != nil || res.Error != nil {
		c.release()
		return nil, err
	}
	return c, nil
}

// prepare makes c ready for t's commands: the image's toolchains checked
// against t's requirements, the site's runtime found, or the layers it
// starts from and its own layer's directories. A task that cannot run in
// it gets res.Error, a worker's failure the error.
func (e *Executor) prepare(ctx context.Context, t *schema.NodeTask, im *image.Image, c *containerRun, user *TaskUser, layer *pendingLayer, res *schema.NodeResult) error {
	tools, err := e.imageToolchains(ctx, im)
	if err != nil {
		return err
	}
	res.Toolchain = tools
	if res.Error = imageMissing(t, tools); res.Error != nil {
		return nil
	}
	if rt := t.Container.Runtime; rt != "" && rt != schema.RuntimeHPCQ {
		site, err := lookupRuntime(ctx, rt)
		if err != nil {
			res.Error = &schema.ResultError{Phase: schema.PhaseCoding, Kind: schema.ErrKindImage, Message: err.Error()}
			return nil
		}
		c.site, c.siteImage = site, site.imageArg(t.Container.Image, im)
		res.Container.Runtime = site.describe()
		res.Container.LayerNote = fmt.Sprintf("the site runtime %s keeps no layer: what the commands write over the image is lost with each, "+
			"and the node's children start from the image", rt)
		if len(t.Container.Layers) > 0 {
			res.Container.LayerNote += fmt.Sprintf("; the %d layers its ancestors left are not applied either", len(t.Container.Layers))
		}
		return nil
	}
	e.inherit(ctx, t, c, res.Container)
	if layer == nil {
		return errors.New("the node's layer: its directory was not started")
	}
	c.scaffold = e.scaffold(c.root)
	upper, err := layer.take()
	if err != nil {
		return fmt.Errorf("the node's layer: %w", err)
	}
	c.upper = upper
	if err := e.aptConfig(c, user); err != nil {
		return fmt.Errorf("the node's layer: %w", err)
	}
	return nil
}

// packageCaches are what package managers keep to go faster next time
// and make again when it is gone: left out of layers (as apt-get clean
// would), which they would otherwise double.
var packageCaches = []string{"/var/cache/apt/archives", "/var/cache/apt/pkgcache.bin", "/var/cache/apt/srcpkgcache.bin", "/root/.cache/pip"}

// aptConf is a file the attempt's container has when its image has apt:
// the container's root is one id (the task's user), and apt, run as
// root, would switch to its _apt user for downloads, which the user
// namespace does not map. It is not part of the node's layer.
const (
	aptConf     = "/etc/apt/apt.conf.d/00hpcq-container"
	aptConfText = "// hpcq: the container's root is one id mapped to the task's user; apt cannot switch to its _apt user.\n" +
		"APT::Sandbox::User \"root\";\n"
)

// aptConfig writes aptConf in c's upper layer when the image has apt,
// owned as the container's root is (uid, gid on the host).
func (e *Executor) aptConfig(c *containerRun, u *TaskUser) error {
	if fi, err := os.Stat(filepath.Join(c.root, filepath.Dir(aptConf))); err != nil || !fi.IsDir() {
		return nil
	}
	uid, gid := e.sandbox.containerIDs(u)
	upper := filepath.Join(c.upper, "upper")
	dir := upper
	for _, part := range strings.Split(strings.Trim(filepath.Dir(aptConf), "/"), "/") {
		dir = filepath.Join(dir, part)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		if err := os.Lchown(dir, uid, gid); err != nil {
			return err
		}
	}
	f := filepath.Join(upper, aptConf)
	if err := os.WriteFile(f, []byte(aptConfText), 0o644); err != nil {
		return err
	}
	return os.Lchown(f, uid, gid)
}

// layerDir is where an attempt's commands' writes over its image go:
// beside the workspace, not in it (the container does not see it).
func (e *Executor) layerDir(t *schema.NodeTask) string {
	return filepath.Join(e.cfg.RunsDir, t.RunID, "layers", t.NodeID, strconv.Itoa(t.Attempt))
}

// inherit finds the layers t starts from (its ancestors', the oldest
// first) in the cache, fetching those it lacks from the object store. A
// layer that cannot be had ends the chain there (the ones above it hold
// changes to it): the node starts from the layers below it, and used says
// why in LayerNote.
func (e *Executor) inherit(ctx context.Context, t *schema.NodeTask, c *containerRun, used *schema.ContainerUsed) {
	cache, err := e.imageCache()
	if err != nil {
		used.LayerNote = err.Error()
		return
	}
	for i, d := range t.Container.Layers {
		l, err := cache.Layer(ctx, d)
		if errors.Is(err, image.ErrNoLayer) {
			if err = e.fetchLayer(ctx, cache, d); err == nil {
				l, err = cache.Layer(ctx, d)
			}
		}
		if err != nil {
			used.LayerNote = fmt.Sprintf("started from %d of the %d layers its ancestors left: %s: %v", i, len(t.Container.Layers), d, err)
			return
		}
		c.held = append(c.held, l)
		c.layers = append(c.layers, l.Root)
		used.Layers = append(used.Layers, d)
	}
}

// seal keeps what the attempt's commands wrote over the image as the
// node's layer (in the cache, and in the object store for other workers
// when within the cap), and says so in used; the attempt's layer
// directory is removed.
func (e *Executor) seal(ctx context.Context, c *containerRun, ws string, u *TaskUser, used *schema.ContainerUsed) {
	defer e.dropLayerDir(c.upper)
	cache, err := e.imageCache()
	if err != nil {
		used.LayerNote = join(used.LayerNote, "its layer was not kept: "+err.Error())
		return
	}
	uid, gid := e.sandbox.containerIDs(u)
	skip := append(append([]string{"/proc", "/dev", "/sys", "/tmp", "/var/tmp", "/etc/resolv.conf", "/etc/hosts", "/.hpcq-old-root", "/.hpcq", aptConf, ws},
		packageCaches...), e.sandbox.writable...)
	info, err := cache.SealLayer(ctx, filepath.Join(c.upper, "upper"), image.SealOptions{Skip: skip, UID: uid, GID: gid})
	if err != nil {
		used.LayerNote = join(used.LayerNote, "its layer was not kept: "+err.Error())
		return
	}
	if info.Digest == "" {
		return // nothing written over the image
	}
	used.Layer, used.LayerBytes = info.Digest, info.Bytes
	lowers := []string{c.root}
	for _, l := range c.layers {
		lowers = append([]string{l}, lowers...)
	}
	used.LayerHolds = image.Holds(filepath.Join(c.upper, "upper"), lowers, skip)
	if why := e.shareLayer(ctx, cache, info); why != "" {
		used.LayerNote = join(used.LayerNote, why)
	}
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
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
	c.SetPolicy(e.imagePolicy)
	e.images = c
	return c, nil
}
