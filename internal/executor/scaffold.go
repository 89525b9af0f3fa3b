package executor

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// A container's sandbox mounts /proc, /dev, /sys, a bounded /tmp (also
// /var/tmp and /dev/shm), the host's resolv.conf and hosts, and the
// workspace at its own path, and pivots into the root through
// /.hpcq-old-root. What of those the image lacks it would make in the
// attempt's layer, on disk (a directory's copy-up included): a third of a
// no-op container task's set-up. The scaffold is a small tree of those
// mount points, laid as the nearest lower layer (read-only, shared by the
// attempts of an image), so the sandbox finds them and writes nothing.
// An image's own entry decides: a directory the image has is copied with
// its mode and owner (the nearest layer's directory is the one the
// container sees), and a path the image holds as something else (a link
// where a directory would go) is left out, made as before.

// scaffoldDirs and scaffoldFiles are the mount points, relative to the
// container's root.
var (
	scaffoldDirs  = []string{"proc", "dev", "dev/shm", "sys", "tmp", "var", "var/tmp", "etc", ".hpcq-old-root"}
	scaffoldFiles = []string{"etc/resolv.conf", "etc/hosts"}
)

// scaffold is the scaffold of the image whose tree is root (made once per
// image tree and worker, kept under the runs directory); "" when it cannot
// be made (the sandbox then makes the mount points itself).
func (e *Executor) scaffold(root string) string {
	e.imagesMu.Lock()
	defer e.imagesMu.Unlock()
	if dir, ok := e.scaffolds[root]; ok {
		return dir
	}
	dir, err := e.makeScaffold(root)
	if err != nil {
		e.cfg.Images.Log.Warn("no scaffold for the image: its containers make their mount points in their layer", "image", root, "err", err)
		dir = ""
	}
	if e.scaffolds == nil {
		e.scaffolds = map[string]string{}
	}
	e.scaffolds[root] = dir
	return dir
}

// makeScaffold writes the scaffold of root into the runs directory's
// .scaffold, whole or not at all (made aside, then renamed).
func (e *Executor) makeScaffold(root string) (string, error) {
	h := sha256.Sum256([]byte(root + "\x00" + e.cfg.RunsDir))
	base := filepath.Join(e.cfg.RunsDir, ".scaffold")
	dir := filepath.Join(base, hex.EncodeToString(h[:12]))
	if err := os.MkdirAll(base, 0o700); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(base, ".make-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	dirs := append([]string(nil), scaffoldDirs...)
	// The runs directory's own path: the workspace is mounted below it.
	for d := strings.TrimPrefix(filepath.Clean(e.cfg.RunsDir), "/"); d != "." && d != ""; d = filepath.Dir(d) {
		dirs = append(dirs, d)
	}
	skipped := map[string]bool{}
	for _, d := range sortedByDepth(dirs) {
		if skipped[filepath.Dir(d)] {
			skipped[d] = true
			continue
		}
		mode, uid, gid := fs.FileMode(0o755), 0, 0
		fi, err := os.Lstat(filepath.Join(root, d))
		switch {
		case err == nil && fi.IsDir():
			mode = fi.Mode().Perm() | fi.Mode()&(fs.ModeSticky)
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				uid, gid = int(st.Uid), int(st.Gid)
			}
		case err == nil, !errors.Is(err, fs.ErrNotExist):
			skipped[d] = true // the image has something else there
			continue
		}
		p := filepath.Join(tmp, d)
		if err := os.Mkdir(p, 0o755); err != nil {
			return "", err
		}
		if err := os.Chmod(p, mode); err != nil {
			return "", err
		}
		if err := os.Lchown(p, uid, gid); err != nil && os.Geteuid() == 0 {
			return "", err
		}
	}
	for _, f := range scaffoldFiles {
		if skipped[filepath.Dir(f)] {
			continue
		}
		if fi, err := os.Lstat(filepath.Join(root, f)); err == nil && !fi.Mode().IsRegular() && fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		if err := os.WriteFile(filepath.Join(tmp, f), nil, 0o644); err != nil {
			return "", err
		}
	}
	_ = os.RemoveAll(dir) // a scaffold of an older build
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	return dir, nil
}

// sortedByDepth is dirs, parents first, once each.
func sortedByDepth(dirs []string) []string {
	out := slices.Clone(dirs)
	slices.SortFunc(out, func(a, b string) int {
		if c := cmp.Compare(strings.Count(a, "/"), strings.Count(b, "/")); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return slices.Compact(out)
}
