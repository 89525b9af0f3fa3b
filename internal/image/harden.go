package image

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// What the cache keeps of an image must grant nothing on the host. An
// image is written by whoever built it, a layer by whatever a task ran:
// a setuid-root program of either, or a device node (unsquashfs run as
// root makes them as the image says), would be there for any local user
// to run or open. So, besides the cache's directories being the worker's
// alone (cacheMode):
//   - no file keeps a setuid or setgid bit: a container runs with nosuid
//     anyway, so inside it nothing changes;
//   - no device node, FIFO or socket is kept: a task's /dev is the host's,
//     bound in, and an image's own is never used;
//   - no extended attribute is kept (file capabilities are one): unsquashfs
//     runs with -no-xattrs, and the tar readers write none.
//
// The overlay's whiteouts (character devices 0/0) that untarLayer makes
// are the one exception: a 0/0 device opens nothing.

// cacheMode is the mode of the cache's directory and of each entry's: the
// worker's user alone (a task reaches an image only through the mounts
// its sandbox makes as root).
const cacheMode = 0o700

// stripMode is what no file of the cache keeps.
const stripMode = fs.ModeSetuid | fs.ModeSetgid

// hardened is meta.Hardened of an entry made by this build: one made by an
// older build is hardened in place when the cache opens (hardenOld).
const hardened = 1

// harden removes from the tree at root what must not survive an unpack
// (see above), and says what it removed; the tree is the worker's own, in
// a directory no one else can reach, so nothing changes under it.
func harden(root string) (removed, cleared int, err error) {
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch t := d.Type(); {
		case t&fs.ModeSymlink != 0:
			return nil
		case t&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeNamedPipe|fs.ModeSocket|fs.ModeIrregular) != 0:
			if whiteoutAt(p) {
				return nil
			}
			if err := os.Remove(p); err != nil {
				return err
			}
			removed++
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode()&stripMode != 0 {
			if err := os.Chmod(p, fi.Mode()&^stripMode); err != nil {
				return err
			}
			cleared++
		}
		return nil
	})
	return removed, cleared, err
}

// whiteoutAt reports whether p is an overlay whiteout (a character device
// 0/0), which a layer's tree keeps.
func whiteoutAt(p string) bool {
	var st unix.Stat_t
	return unix.Lstat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0
}

// privateDir makes dir (and its parents) and gives it cacheMode, which a
// directory made by an older build (0755) did not have.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, cacheMode); err != nil {
		return err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if fi.Mode().Perm() != cacheMode {
		if err := os.Chmod(dir, cacheMode); err != nil {
			return fmt.Errorf("%s must be the worker's alone (mode 0700): %w", dir, err)
		}
	}
	return nil
}

// hardenOld hardens, in place, the entries an older build unpacked (their
// meta.json without Hardened), each under its lock taken exclusively; one
// in use by another worker is left for the next start, not waited for.
func (c *Cache) hardenOld() {
	dirs, _ := os.ReadDir(c.dir)
	for _, d := range dirs {
		entry := filepath.Join(c.dir, d.Name())
		if !d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			continue
		}
		if m, err := readMeta(entry); err != nil || m.Hardened >= hardened {
			continue
		}
		lock, err := lockEntry(entry, unix.LOCK_EX|unix.LOCK_NB)
		if err != nil {
			c.log.Warn("image cache: an entry of an older build is in use: hardened at the next start", "dir", entry)
			continue
		}
		m, err := readMeta(entry)
		if err == nil && m.Hardened < hardened {
			var removed, cleared int
			if removed, cleared, err = harden(filepath.Join(entry, "rootfs")); err == nil {
				m.Hardened = hardened
				err = writeMeta(entry, m)
			}
			c.log.Info("image cache: an older build's entry hardened", "dir", entry, "removed", removed, "setid_cleared", cleared, "err", err)
		}
		lock.Close()
	}
}

// guard turns a panic of an image library (a corrupt header it reads
// lengths from) into an image error of the image at path, with the
// library's words: the task fails, the worker and its locks go on.
func guard(path string, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%w: %s: the image's reader failed on it (a damaged or hostile file): %v", ErrImage, path, r)
	}
}
