package image

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hpcq/hpcq/internal/fileio"
)

// KindLayer is a cache entry holding a layer: what a node's commands wrote
// over its image, as an overlay's lower directory (rootfs) and as the OCI
// layer tar it was unpacked from (layer.tar), by the tar's digest.
const KindLayer = "layer"

// ErrNoLayer is returned by Layer when the cache does not hold the layer.
var ErrNoLayer = errors.New("image: layer not in the cache")

// The OCI image spec's whiteouts: a file removed, and a directory whose
// lower layers' entries are hidden (opaque).
const (
	whiteoutPrefix = ".wh."
	whiteoutOpaque = ".wh..wh..opq"
)

// SealOptions say how an overlay's upper directory becomes a layer.
type SealOptions struct {
	// Skip are paths in the container (absolute) that the sandbox made:
	// mount points, the workspace's path. They are left out, with the
	// directories made only to hold them.
	Skip []string
	// UID and GID are the host ids the container's root had: files they
	// own are root's in the layer.
	UID, GID int
}

// LayerInfo is a layer kept in the cache.
type LayerInfo struct {
	Digest string // sha256 of layer.tar (the OCI diff id)
	Bytes  int64  // the tar's size
}

// SealLayer packs upper, the upper directory of a container's overlay, as
// an OCI layer (removed files as whiteouts) and keeps it in the cache by
// its digest. An upper holding nothing but what opts.Skip names is no
// layer: the zero LayerInfo.
func (c *Cache) SealLayer(ctx context.Context, upper string, opts SealOptions) (LayerInfo, error) {
	ents, err := layerEntries(ctx, upper, opts)
	if err != nil {
		return LayerInfo{}, fmt.Errorf("layer: %s: %w", upper, err)
	}
	if len(ents) == 0 {
		return LayerInfo{}, nil // nothing written over the image: no file made
	}
	tmp, digest, err := hashedTemp(c.dir, ".layer-*.tar", func(w io.Writer) error { return packLayer(upper, ents, w, opts) })
	defer os.Remove(tmp)
	if err != nil {
		return LayerInfo{}, fmt.Errorf("layer: pack %s: %w", upper, err)
	}
	return c.keepLayer(ctx, digest, tmp)
}

// AddLayer keeps the layer tar r (fetched from another worker) in the
// cache, after checking that it is the digest it is said to be.
func (c *Cache) AddLayer(ctx context.Context, digest string, r io.Reader) (LayerInfo, error) {
	tmp, got, err := hashedTemp(c.dir, ".layer-*.tar", func(w io.Writer) error {
		_, err := io.Copy(w, readerCtx{ctx, r})
		return err
	})
	defer os.Remove(tmp)
	switch {
	case err != nil:
		return LayerInfo{}, fmt.Errorf("layer %s: %w", digest, err)
	case got != digest:
		return LayerInfo{}, fmt.Errorf("%w: the layer said to be %s is %s", ErrImage, digest, got)
	}
	return c.keepLayer(ctx, digest, tmp)
}

// hashedTemp is a new file of dir (named by pattern) holding what write
// writes, and its sha256 digest. The caller removes the file (its path is
// set whatever the error, "" when it could not be made).
func hashedTemp(dir, pattern string, write func(w io.Writer) error) (string, string, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return "", "", err
	}
	h := sha256.New()
	err = write(io.MultiWriter(f, h))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return f.Name(), "sha256:" + hex.EncodeToString(h.Sum(nil)), err
}

// keepLayer makes the entry of layer digest from its tar at tarPath
// (moved into it), unless the cache has it already.
func (c *Cache) keepLayer(ctx context.Context, digest, tarPath string) (LayerInfo, error) {
	fi, err := os.Stat(tarPath)
	if err != nil {
		return LayerInfo{}, err
	}
	info := LayerInfo{Digest: digest, Bytes: fi.Size()}
	entry := filepath.Join(c.dir, strings.TrimPrefix(digest, "sha256:"))
	lock, err := lockEntry(entry, syscall.LOCK_EX)
	if err != nil {
		return LayerInfo{}, err
	}
	defer lock.Close()
	if _, err := os.Stat(filepath.Join(entry, "meta.json")); err == nil {
		return info, nil // the same content, kept before
	}
	start := time.Now()
	_ = os.RemoveAll(filepath.Join(entry, "rootfs"))
	tmp, err := os.MkdirTemp(entry, ".unpack-")
	if err != nil {
		return LayerInfo{}, err
	}
	defer os.RemoveAll(tmp)
	f, err := os.Open(tarPath)
	if err != nil {
		return LayerInfo{}, err
	}
	err = untarLayer(readerCtx{ctx, f}, filepath.Join(tmp, "rootfs"))
	f.Close()
	if err != nil {
		return LayerInfo{}, fmt.Errorf("layer %s: %w", digest, err)
	}
	if err := os.Rename(filepath.Join(tmp, "rootfs"), filepath.Join(entry, "rootfs")); err != nil {
		return LayerInfo{}, err
	}
	if err := os.Rename(tarPath, filepath.Join(entry, layerTar)); err != nil {
		return LayerInfo{}, err
	}
	tree, err := treeBytes(filepath.Join(entry, "rootfs"))
	if err != nil {
		return LayerInfo{}, err
	}
	if err := writeMeta(entry, meta{Ref: digest, Kind: KindLayer, Digest: digest, Bytes: tree + info.Bytes, Unpacked: time.Now().UTC()}); err != nil {
		return LayerInfo{}, err
	}
	c.log.Info("layer kept", "digest", digest, "bytes", info.Bytes, "took", time.Since(start).Round(time.Millisecond))
	c.evict(entry)
	return info, nil
}

// layerTar is the file of a layer entry holding its tar.
const layerTar = "layer.tar"

// Layer holds the cached layer digest (its rootfs: an overlay lower
// directory) until Release; ErrNoLayer when the cache does not have it.
func (c *Cache) Layer(ctx context.Context, digest string) (*Image, error) {
	if !validDigest(digest) {
		return nil, fmt.Errorf("%w: %q is not a sha256 digest", ErrImage, digest)
	}
	entry := filepath.Join(c.dir, strings.TrimPrefix(digest, "sha256:"))
	if _, err := os.Stat(filepath.Join(entry, "meta.json")); err != nil {
		return nil, ErrNoLayer
	}
	lock, err := lockEntry(entry, syscall.LOCK_SH)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(entry, "meta.json")); err != nil {
		lock.Close() // evicted meanwhile
		return nil, ErrNoLayer
	}
	now := time.Now()
	_ = os.Chtimes(filepath.Join(entry, "lock"), now, now)
	return &Image{Ref: digest, Kind: KindLayer, Digest: digest, Root: filepath.Join(entry, "rootfs"), release: func() { lock.Close() }}, nil
}

// OpenLayerTar opens the tar of the cached layer digest (to share it).
func (c *Cache) OpenLayerTar(digest string) (*os.File, error) {
	if !validDigest(digest) {
		return nil, fmt.Errorf("%w: %q is not a sha256 digest", ErrImage, digest)
	}
	return os.Open(filepath.Join(c.dir, strings.TrimPrefix(digest, "sha256:"), layerTar))
}

func validDigest(d string) bool {
	h, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

// layerEntry is an entry of an upper directory a layer carries.
type layerEntry struct {
	rel string // slashed, relative to the upper directory
	fi  fs.FileInfo
}

// layerEntries are the entries of upper a layer carries, parents first:
// not what opts.Skip names, nor the directories made only to hold it, nor
// sockets, FIFOs and devices (whiteouts aside).
func layerEntries(ctx context.Context, upper string, opts SealOptions) ([]layerEntry, error) {
	var ents []layerEntry
	holders := map[string]bool{} // directories on the way to a skipped path
	for _, s := range opts.Skip {
		for d := path.Dir(strings.TrimPrefix(path.Clean(s), "/")); d != "." && d != "/"; d = path.Dir(d) {
			holders[d] = true
		}
	}
	skipped := skipper(opts.Skip)
	err := filepath.WalkDir(upper, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(upper, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if skipped(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if carried(fi) {
			ents = append(ents, layerEntry{rel, fi})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// A holder is kept when something of its own is kept below it, or it
	// hides what is below it.
	keep := make([]bool, len(ents))
	needed := map[string]bool{}
	for i := len(ents) - 1; i >= 0; i-- {
		e := ents[i]
		keep[i] = !holders[e.rel] || needed[e.rel] || opaque(filepath.Join(upper, e.rel))
		if keep[i] {
			for d := path.Dir(e.rel); d != "."; d = path.Dir(d) {
				needed[d] = true
			}
		}
	}
	kept := ents[:0]
	for i, e := range ents {
		if keep[i] {
			kept = append(kept, e)
		}
	}
	return kept, nil
}

// carried reports whether a layer carries an entry of this kind: files,
// directories, symbolic links and overlay whiteouts (devices 0/0).
func carried(fi fs.FileInfo) bool {
	return fi.Mode().IsRegular() || fi.IsDir() || fi.Mode()&fs.ModeSymlink != 0 || whiteout(fi)
}

func whiteout(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && fi.Mode()&fs.ModeCharDevice != 0 && st.Rdev == 0
}

// packLayer writes ents of upper as an OCI layer tar to w: whiteouts as
// .wh. files, opaque directories with .wh..wh..opq, hard links as links,
// the ids of opts.UID/GID as root's.
func packLayer(upper string, ents []layerEntry, w io.Writer, opts SealOptions) error {
	root, err := os.OpenRoot(upper)
	if err != nil {
		return err
	}
	defer root.Close()
	tw := tar.NewWriter(w)
	links := map[uint64]string{} // inode -> the first name written
	for _, e := range ents {
		if err := packEntry(tw, root, upper, e.rel, e.fi, links, opts); err != nil {
			return fmt.Errorf("%s: %w", e.rel, err)
		}
	}
	return tw.Close()
}

// skipper reports whether a path of a layer (relative, slashed) is one of
// skip (absolute paths in the container) or below one.
func skipper(skip []string) func(rel string) bool {
	clean := make([]string, len(skip))
	for i, s := range skip {
		clean[i] = strings.TrimPrefix(path.Clean(s), "/")
	}
	return func(rel string) bool {
		for _, s := range clean {
			if rel == s || strings.HasPrefix(rel, s+"/") {
				return true
			}
		}
		return false
	}
}

// packEntry writes one entry of the upper directory (one carried). A
// file's content is read through root (the upper directory) only if it is
// still a regular file, a link not followed, without blocking: the task
// wrote the tree, the worker reads it with its privileges.
func packEntry(tw *tar.Writer, root *os.Root, upper, rel string, fi fs.FileInfo, links map[uint64]string, opts SealOptions) error {
	full := filepath.Join(upper, rel)
	st, _ := fi.Sys().(*syscall.Stat_t)
	if whiteout(fi) {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: path.Join(path.Dir(rel), whiteoutPrefix+path.Base(rel)), Mode: 0o600, ModTime: fi.ModTime()}
		return tw.WriteHeader(h)
	}
	var link string
	if fi.Mode()&fs.ModeSymlink != 0 {
		l, err := os.Readlink(full)
		if err != nil {
			return err
		}
		link = l
	}
	h, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return err
	}
	h.Name = rel
	h.Uname, h.Gname = "", ""
	h.Mode &^= 0o6000 // no setuid or setgid bit leaves a task (harden.go)
	if st != nil {
		h.Uid, h.Gid = int(st.Uid), int(st.Gid)
		if h.Uid == opts.UID {
			h.Uid = 0
		}
		if h.Gid == opts.GID {
			h.Gid = 0
		}
	}
	if fi.IsDir() {
		h.Name += "/"
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if opaque(full) {
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel + "/" + whiteoutOpaque, Mode: 0o600, ModTime: fi.ModTime()})
		}
		return nil
	}
	if fi.Mode().IsRegular() && st != nil && st.Nlink > 1 {
		if first, ok := links[st.Ino]; ok {
			h.Typeflag, h.Linkname, h.Size = tar.TypeLink, first, 0
			return tw.WriteHeader(h)
		}
		links[st.Ino] = rel
	}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	f, _, err := fileio.OpenRegular(root, rel)
	if err != nil {
		return err
	}
	defer f.Close()
	// The size the header says, not what the file grew to since.
	_, err = io.CopyN(tw, f, h.Size)
	return err
}

// Overlay's marks of an opaque directory: trusted.* where the overlay was
// mounted as root, user.* in a user namespace (userxattr).
var opaqueXattrs = []string{"trusted.overlay.opaque", "user.overlay.opaque"}

func opaque(dir string) bool {
	buf := make([]byte, 4)
	for _, x := range opaqueXattrs {
		if n, err := unix.Lgetxattr(dir, x, buf); err == nil && n == 1 && buf[0] == 'y' {
			return true
		}
	}
	return false
}

// untarLayer unpacks a layer tar into dest as an overlay lower directory:
// its whiteouts become what overlay reads as whiteouts (a character device
// 0/0, the opaque mark on a directory: trusted.* as root, user.* not).
func untarLayer(r io.Reader, dest string) error {
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return err
	}
	var whiteouts, opaques []string
	err := untarWith(r, dest, func(name string) bool {
		base := path.Base(name)
		switch {
		case base == whiteoutOpaque:
			opaques = append(opaques, path.Dir(name))
		case strings.HasPrefix(base, whiteoutPrefix):
			whiteouts = append(whiteouts, path.Join(path.Dir(name), strings.TrimPrefix(base, whiteoutPrefix)))
		default:
			return false
		}
		return true
	})
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(dest)
	if err != nil {
		return err
	}
	defer root.Close()
	xattr := opaqueXattrs[1]
	if os.Geteuid() == 0 {
		xattr = opaqueXattrs[0]
	}
	for _, d := range opaques {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("%s: %w", d, err)
		}
		if err := inDir(root, d, func(fd int) error { return unix.Fsetxattr(fd, xattr, []byte("y"), 0) }); err != nil {
			return fmt.Errorf("opaque %s: %w", d, err)
		}
	}
	for _, wo := range whiteouts {
		dir, base := path.Dir(wo), path.Base(wo)
		if base == "." || base == ".." || strings.Contains(base, "/") {
			continue
		}
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("%s: %w", wo, err)
		}
		_ = root.RemoveAll(wo)
		if err := inDir(root, dir, func(fd int) error { return unix.Mknodat(fd, base, unix.S_IFCHR, 0) }); err != nil {
			return fmt.Errorf("whiteout %s: %w", wo, err)
		}
	}
	return nil
}

// inDir calls fn with a descriptor of dir, opened through root.
func inDir(root *os.Root, dir string, fn func(fd int) error) error {
	f, err := root.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return fn(int(f.Fd()))
}
