package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Cache is the node-local cache of unpacked images: one directory per
// digest,
//
//	<dir>/<hex>/rootfs/     the root file system
//	<dir>/<hex>/meta.json   what it was unpacked from, its size
//	<dir>/<hex>/lock        flock: shared while an image is used, exclusive while unpacked or removed
//
// shared by every worker of the machine (the locks are the kernel's, so
// two workers unpack an image once and never remove one the other uses).
type Cache struct {
	dir      string
	maxBytes int64
	log      *slog.Logger

	mu      sync.Mutex
	digests map[fileKey]string // a file's digest, by what identifies its content

	policy Policy // which images tasks may name (SetPolicy)
}

// SetPolicy sets which images Get gives (the zero Policy: no directory
// image; an image file only as its task's user may read it).
func (c *Cache) SetPolicy(p Policy) { c.policy = p }

// fileKey identifies a file's content without reading it: a file replaced
// or written since has another inode, size or time.
type fileKey struct {
	path          string
	dev, ino      uint64
	size, mtimeNs int64
}

// meta is <hex>/meta.json.
type meta struct {
	Ref      string    `json:"ref"`
	Kind     string    `json:"kind"`
	Digest   string    `json:"digest"`
	Bytes    int64     `json:"bytes"`
	Unpacked time.Time `json:"unpacked"`
	// Hardened is the version of what harden removed from the tree (no
	// setuid/setgid bit, no device node): 0 in an older build's entry.
	Hardened int `json:"hardened,omitempty"`
}

// OpenCache opens (making it) the cache in dir, bounded to maxBytes of
// unpacked trees (0: unbounded).
func OpenCache(dir string, maxBytes int64, log *slog.Logger) (*Cache, error) {
	if dir == "" {
		return nil, errors.New("image: no cache directory (HPCQ_IMAGE_CACHE)")
	}
	if err := privateDir(dir); err != nil {
		return nil, fmt.Errorf("image cache: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	c := &Cache{dir: abs, maxBytes: maxBytes, log: log, digests: map[fileKey]string{}}
	c.hardenOld()
	return c, nil
}

// Get resolves the image at ref for the worker's own use (GetAs without
// a task's user).
func (c *Cache) Get(ctx context.Context, ref string) (*Image, error) {
	return c.GetAs(ctx, ref, -1, -1)
}

// GetAs resolves the image at ref for a task running as uid:gid (uid < 0:
// as the worker's user), as the cache's Policy allows: a directory as it
// is, anything else unpacked into the cache (once per digest). The image
// is held until Release.
func (c *Cache) GetAs(ctx context.Context, ref string, uid, gid int) (*Image, error) {
	abs, err := resolve(ref)
	if err != nil {
		return nil, err
	}
	kind, err := KindOf(abs)
	if err != nil {
		return nil, err
	}
	if err := c.policy.check(ref, abs, kind, uid, gid); err != nil {
		return nil, err
	}
	if kind == KindDir {
		return &Image{Ref: ref, Kind: kind, Root: abs}, nil
	}
	digest, err := c.digest(ctx, abs, kind)
	if err != nil {
		return nil, err
	}
	entry := filepath.Join(c.dir, strings.TrimPrefix(digest, "sha256:"))
	lock, err := c.hold(entry, func() error { return c.unpack(ctx, abs, kind, digest, entry) })
	if err != nil {
		return nil, err
	}
	now := time.Now()
	_ = os.Chtimes(filepath.Join(entry, "lock"), now, now) // the last use, for eviction
	im := &Image{Ref: ref, Kind: kind, Digest: digest, Root: filepath.Join(entry, "rootfs"), release: func() { lock.Close() }}
	c.evict(entry)
	return im, nil
}

// hold takes entry's lock shared, unpacking the image first (under the
// lock held exclusively) when the entry is not whole. Shared holders do not
// wait for each other; eviction skips an entry held.
func (c *Cache) hold(entry string, fill func() error) (*os.File, error) {
	whole := func() (bool, error) {
		_, err := os.Stat(filepath.Join(entry, "meta.json"))
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return err == nil, err
	}
	lock, err := lockEntry(entry, syscall.LOCK_SH)
	if err != nil {
		return nil, err
	}
	if ok, err := whole(); ok || err != nil {
		if err != nil {
			lock.Close()
		}
		return lock, err
	}
	lock.Close()
	if lock, err = lockEntry(entry, syscall.LOCK_EX); err != nil {
		return nil, err
	}
	held := false
	defer func() { // on every path, a panic of fill's included
		if !held {
			lock.Close()
		}
	}()
	ok, err := whole() // another worker may have unpacked it meanwhile
	if err == nil && !ok {
		err = fill()
	}
	if err == nil {
		err = syscall.Flock(int(lock.Fd()), syscall.LOCK_SH)
	}
	if err != nil {
		return nil, err
	}
	held = true
	return lock, nil
}

// lockEntry makes entry and takes its lock (how: LOCK_EX or LOCK_SH).
func lockEntry(entry string, how int) (*os.File, error) {
	if err := os.Mkdir(entry, cacheMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("image cache: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(entry, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("image cache: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, fmt.Errorf("image cache: lock %s: %w", entry, err)
	}
	return f, nil
}

// unpack unpacks the image into entry/rootfs through a temporary
// directory, then writes meta.json: an entry with meta.json is whole.
func (c *Cache) unpack(ctx context.Context, path, kind, digest, entry string) (err error) {
	defer guard(path, &err)
	start := time.Now()
	tmp, err := os.MkdirTemp(entry, ".unpack-")
	if err != nil {
		return fmt.Errorf("image cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	root := filepath.Join(tmp, "rootfs")
	switch kind {
	case KindSquashFS:
		err = unsquash(ctx, path, path, root)
	case KindSIF:
		err = unpackSIF(ctx, path, root, tmp)
	case KindOCI:
		err = unpackOCI(ctx, path, root, tmp)
	}
	if err != nil {
		return err
	}
	removed, cleared, err := harden(root)
	if err != nil {
		return fmt.Errorf("image cache: %s: %w", path, err)
	}
	size, err := treeBytes(root)
	if err != nil {
		return err
	}
	_ = os.RemoveAll(filepath.Join(entry, "rootfs")) // a partial tree of an unpack that died
	if err := os.Rename(root, filepath.Join(entry, "rootfs")); err != nil {
		return fmt.Errorf("image cache: %w", err)
	}
	if err := writeMeta(entry, meta{Ref: path, Kind: kind, Digest: digest, Bytes: size, Unpacked: time.Now().UTC(), Hardened: hardened}); err != nil {
		return err
	}
	c.log.Info("image unpacked", "image", path, "kind", kind, "digest", digest, "bytes", size, "took", time.Since(start).Round(time.Millisecond),
		"special_files_left_out", removed, "setid_bits_cleared", cleared)
	return nil
}

// readMeta reads entry's meta.json.
func readMeta(entry string) (meta, error) {
	var m meta
	data, err := os.ReadFile(filepath.Join(entry, "meta.json"))
	if err == nil {
		err = json.Unmarshal(data, &m)
	}
	return m, err
}

// writeMeta writes entry's meta.json: the entry is whole.
func writeMeta(entry string, m meta) error {
	data, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(entry, "meta.json"), append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("image cache: %w", err)
	}
	return nil
}

// digest is the image's digest: its manifest's (OCI), else the file's
// SHA-256, computed once per content (a worker asks for the same image on
// every task: a SIF of gigabytes, an OCI archive to unpack, are read once).
func (c *Cache) digest(ctx context.Context, path, kind string) (string, error) {
	// What identifies the content without reading it: the file, or an OCI
	// layout directory's index.json (rewritten whenever an image is added).
	ident := path
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		ident = filepath.Join(path, "index.json")
	}
	fi, err := os.Stat(ident)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrImage, path, err)
	}
	key := fileKey{path: ident, size: fi.Size(), mtimeNs: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		key.dev, key.ino = st.Dev, st.Ino
	}
	c.mu.Lock()
	d, ok := c.digests[key]
	c.mu.Unlock()
	if ok {
		return d, nil
	}
	if kind == KindOCI {
		d, err = ociDigest(ctx, path)
	} else {
		d, err = fileDigest(ctx, path)
	}
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	c.digests[key] = d
	c.mu.Unlock()
	return d, nil
}

// ociDigest is the digest of the image's manifest (an OCI layout in a tar
// is unpacked to read it: once per file, digest caches it).
func ociDigest(ctx context.Context, path string) (_ string, err error) {
	defer guard(path, &err)
	img, cleanup, err := ociImage(ctx, path)
	if err != nil {
		return "", err
	}
	defer cleanup()
	h, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("%w: %s: manifest digest: %w", ErrImage, path, err)
	}
	return h.String(), nil
}

// fileDigest is the SHA-256 of the file at path.
func fileDigest(ctx context.Context, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrImage, path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, readerCtx{ctx, f}); err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrImage, path, err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// readerCtx stops a long read when ctx ends.
type readerCtx struct {
	ctx context.Context
	r   io.Reader
}

func (r readerCtx) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

// evict removes the least recently used trees, but keep and those in use,
// until the cache is within its bound.
func (c *Cache) evict(keep string) {
	if c.maxBytes <= 0 {
		return
	}
	type ent struct {
		dir   string
		bytes int64
		used  time.Time
	}
	var ents []ent
	var total int64
	dirs, _ := os.ReadDir(c.dir)
	for _, d := range dirs {
		dir := filepath.Join(c.dir, d.Name())
		data, err := os.ReadFile(filepath.Join(dir, "meta.json"))
		var m meta
		if err != nil || json.Unmarshal(data, &m) != nil {
			continue
		}
		used := time.Time{}
		if fi, err := os.Stat(filepath.Join(dir, "lock")); err == nil {
			used = fi.ModTime()
		}
		ents = append(ents, ent{dir, m.Bytes, used})
		total += m.Bytes
	}
	slices.SortFunc(ents, func(a, b ent) int { return a.used.Compare(b.used) })
	for _, e := range ents {
		if total <= c.maxBytes {
			return
		}
		if e.dir == keep {
			continue
		}
		f, err := lockEntry(e.dir, syscall.LOCK_EX|syscall.LOCK_NB)
		if err != nil {
			continue // in use
		}
		// meta.json first: a tree without it is not whole, whatever is left.
		rmErr := os.Remove(filepath.Join(e.dir, "meta.json"))
		if rmErr == nil {
			rmErr = os.RemoveAll(filepath.Join(e.dir, "rootfs"))
		}
		if rmErr == nil {
			rmErr = os.RemoveAll(filepath.Join(e.dir, layerTar))
		}
		f.Close()
		if rmErr != nil {
			c.log.Warn("image cache: not evicted", "dir", e.dir, "err", rmErr)
			continue
		}
		total -= e.bytes
		c.log.Info("image cache: evicted the least recently used", "dir", e.dir, "bytes", e.bytes)
	}
	if total > c.maxBytes {
		c.log.Warn("image cache over its bound: the images in use are larger", "bytes", total, "max_bytes", c.maxBytes)
	}
}

// treeBytes is the size of the files under root.
func treeBytes(root string) (int64, error) {
	var n int64
	err := filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	return n, err
}
