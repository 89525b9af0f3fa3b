package executor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hpcq/hpcq/internal/image"
	"github.com/hpcq/hpcq/pkg/queue"
)

// DefaultLayerShareMB is the largest layer a worker puts in the object
// store for other workers when ImagesConfig.ShareMB is not set.
const DefaultLayerShareMB = 1024

// shareLayer puts the layer in the object store, once per digest, when it
// is within the cap; "" when it is there, else why it is not (a child
// node run on another worker then starts from the layers below it).
func (e *Executor) shareLayer(ctx context.Context, cache *image.Cache, info image.LayerInfo) string {
	store := e.cfg.Images.LayerStore
	if store == nil {
		return ""
	}
	limit := int64(e.cfg.Images.ShareMB)
	if limit <= 0 {
		limit = DefaultLayerShareMB
	}
	if info.Bytes > limit<<20 {
		return fmt.Sprintf("its layer (%d MB) is over the %d MB other workers are sent (HPCQ_LAYER_SHARE_MB): a child run on another worker installs again", info.Bytes>>20, limit)
	}
	name := queue.LayerObject(info.Digest)
	if _, err := store.GetInfo(ctx, name); err == nil {
		return ""
	}
	f, err := cache.OpenLayerTar(info.Digest)
	if err != nil {
		return "its layer was not shared: " + err.Error()
	}
	defer f.Close()
	if _, err := store.Put(ctx, jetstream.ObjectMeta{Name: name, Description: info.Digest}, f); err != nil {
		return fmt.Sprintf("its layer (%d MB) was not shared: %v (the object store %s is bounded by the scheduler's HPCQ_LAYERS_MAX_MB)", info.Bytes>>20, err, queue.LayersBucket)
	}
	return ""
}

// fetchLayer brings layer digest from the object store into the cache.
func (e *Executor) fetchLayer(ctx context.Context, cache *image.Cache, digest string) error {
	store := e.cfg.Images.LayerStore
	if store == nil {
		return errors.New("not on this worker, and no object store to fetch it from")
	}
	r, err := store.Get(ctx, queue.LayerObject(digest))
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return errors.New("not on this worker, nor in the object store (the worker that ran its node did not share it: see that node's layer note)")
	}
	if err != nil {
		return fmt.Errorf("from the object store: %w", err)
	}
	defer r.Close()
	_, err = cache.AddLayer(ctx, digest, r)
	return err
}

// removeTree removes dir, making its directories writable first where
// the overlay left one closed (its work directory).
func removeTree(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// containerIDs are the host ids a container's root has: the task user's
// for a worker running as root, else the worker's own.
func (s *Sandbox) containerIDs(u *TaskUser) (uid, gid int) {
	switch {
	case u != nil && s.uid >= 0:
		return u.UID, u.GID
	case s.uid >= 0:
		return s.uid, s.gid
	}
	return os.Geteuid(), os.Getegid()
}
