package image

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Fetch writes a stored image's file to w.
type Fetch func(ctx context.Context, w io.Writer) error

// GetStored resolves the image ref pushed into the object store by its
// digest (the file's SHA-256): unpacked once per digest like a file, the
// file fetched into the cache first (its digest checked, removed once
// unpacked: the tree is what is kept). The image is held until Release.
func (c *Cache) GetStored(ctx context.Context, ref, digest string, fetch Fetch) (*Image, error) {
	if !validDigest(digest) {
		return nil, fmt.Errorf("%w: %q is not a sha256 digest", ErrImage, digest)
	}
	entry := filepath.Join(c.dir, strings.TrimPrefix(digest, "sha256:"))
	kind := ""
	lock, err := c.hold(entry, func() error {
		file, k, err := c.fetchStored(ctx, digest, entry, fetch)
		if err != nil {
			return err
		}
		defer os.Remove(file)
		kind = k
		return c.unpack(ctx, file, k, digest, entry)
	})
	if err != nil {
		return nil, err
	}
	if kind == "" {
		if m, err := readMeta(entry); err == nil {
			kind = m.Kind
		}
	}
	now := time.Now()
	_ = os.Chtimes(filepath.Join(entry, "lock"), now, now)
	im := &Image{Ref: ref, Kind: kind, Digest: digest, Root: filepath.Join(entry, "rootfs"), release: func() { lock.Close() }}
	c.evict(entry)
	return im, nil
}

// fetchStored brings the stored image's file into entry and says its kind.
func (c *Cache) fetchStored(ctx context.Context, digest, entry string, fetch Fetch) (string, string, error) {
	start := time.Now()
	file, got, err := hashedTemp(entry, ".fetch-", func(w io.Writer) error { return fetch(ctx, w) })
	if err == nil && got != digest {
		err = fmt.Errorf("%w: the stored image %s is %s", ErrImage, digest, got)
	}
	if err != nil {
		os.Remove(file)
		return "", "", fmt.Errorf("stored image %s: %w", digest, err)
	}
	kind, err := KindOf(file)
	if err == nil && kind == KindDir {
		err = fmt.Errorf("%w: a stored image is a file", ErrImage)
	}
	if err != nil {
		os.Remove(file)
		return "", "", err
	}
	c.log.Info("image fetched from the object store", "digest", digest, "kind", kind, "took", time.Since(start).Round(time.Millisecond))
	return file, kind, nil
}

// FileDigest is the SHA-256 of the file at path, as a stored image is
// named.
func FileDigest(ctx context.Context, path string) (string, error) { return fileDigest(ctx, path) }
