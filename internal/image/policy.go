package image

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Policy is which images the tasks of a worker may name. Whoever submits a
// task names its image, and the worker (root, on most clusters) reads it:
// a directory named as an image is mounted as the task's root file system
// with the disk's root made the task's user, so any directory would hand
// its root-only files to the task. So:
//   - a directory image must lie under one of the site's image directories
//     (HPCQ_IMAGE_DIRS), and is never `/` nor a host system directory;
//   - an image file (SquashFS, SIF, an OCI archive) or an OCI layout
//     directory under one of them is the site's; elsewhere, it is used only
//     when the task's user may read it itself (every directory on the way
//     searchable, the file readable, for that user's ids).
//
// Paths are compared once every link in them is resolved: a link in an
// image directory pointing at / is /.
type Policy struct {
	dirs []string
	own  []string // images named by whoever runs the workers (local mode)
}

// systemDirs are the host's directories that are never an image, nor the
// site's image directory: `/` and what the Filesystem Hierarchy Standard
// puts directly under it.
var systemDirs = []string{"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32",
	"/media", "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var"}

// NewPolicy is the policy of the image directories dirs (absolute paths
// of existing directories; none of systemDirs), and of the images own,
// named by whoever runs the workers (a local run's own: its user is the
// workers'), which are allowed as if they lay in an image directory, but
// for a system directory.
func NewPolicy(dirs []string, own ...string) (Policy, error) {
	var p Policy
	for _, o := range own {
		real, err := resolve(o)
		if err != nil {
			return Policy{}, err
		}
		if system(real) {
			return Policy{}, fmt.Errorf("%w: %s is %s, a system directory of the host: never an image", ErrImage, o, real)
		}
		p.own = append(p.own, real)
	}
	for _, d := range dirs {
		d = strings.TrimSpace(d)
		if d == "" {
			continue
		}
		if !filepath.IsAbs(d) {
			return Policy{}, fmt.Errorf("HPCQ_IMAGE_DIRS: %q is not an absolute path", d)
		}
		real, err := filepath.EvalSymlinks(d)
		if err != nil {
			return Policy{}, fmt.Errorf("HPCQ_IMAGE_DIRS: %w", err)
		}
		if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
			return Policy{}, fmt.Errorf("HPCQ_IMAGE_DIRS: %s is not a directory", d)
		}
		if system(real) {
			return Policy{}, fmt.Errorf("HPCQ_IMAGE_DIRS: %s is a system directory of the host (%s): name the directory that holds the images", d, real)
		}
		p.dirs = append(p.dirs, real)
	}
	return p, nil
}

// Dirs are the policy's image directories, resolved.
func (p Policy) Dirs() []string { return p.dirs }

// system reports whether dir (resolved) is one of systemDirs.
func system(dir string) bool { return slices.Contains(systemDirs, dir) }

// under reports whether p is dir or below it.
func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// resolve is ref as an absolute path with no link in it.
func resolve(ref string) (string, error) {
	abs, err := filepath.Abs(ref)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrImage, ref, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrImage, ref, err)
	}
	return real, nil
}

// check says why a task running as uid:gid (uid < 0: as the worker's own
// user, whose reads the kernel checks) may not use the image at real (a
// resolved path) of kind; nil when it may.
func (p Policy) check(ref, real, kind string, uid, gid int) error {
	inDirs := false
	for _, d := range append(p.dirs, p.own...) {
		if under(real, d) {
			inDirs = true
			break
		}
	}
	where := "none is set"
	if len(p.dirs) > 0 {
		where = "they are " + strings.Join(p.dirs, ", ")
	}
	if kind == KindDir {
		switch {
		case system(real):
			return fmt.Errorf("%w: %s is %s, a system directory of the host: never an image", ErrImage, ref, real)
		case !inDirs:
			return fmt.Errorf("%w: %s is a directory: a directory image must lie under one of the site's image directories "+
				"(HPCQ_IMAGE_DIRS on the worker; %s); pack it as a SquashFS or SIF file, or ask the site to add its directory", ErrImage, ref, where)
		}
		return nil
	}
	if inDirs || uid < 0 {
		return nil
	}
	if err := readableBy(real, kind, uid, gid); err != nil {
		return fmt.Errorf("%w: %s: the task's user (uid %d) may not read it (%v), and it lies under none of the site's image directories "+
			"(HPCQ_IMAGE_DIRS; %s)", ErrImage, ref, uid, err, where)
	}
	return nil
}

// readableBy says why uid:gid could not read the file (or OCI layout
// directory) at real: a directory on the way it cannot search, or the
// image itself it cannot read. Supplementary groups are not counted: a
// task's user has none.
func readableBy(real, kind string, uid, gid int) error {
	may := func(st *unix.Stat_t, bits uint32) bool { // bits of "other": 4 read, 1 search
		m := st.Mode
		switch {
		case int(st.Uid) == uid:
			return m>>6&bits == bits
		case int(st.Gid) == gid:
			return m>>3&bits == bits
		}
		return m&bits == bits
	}
	for d := filepath.Dir(real); ; d = filepath.Dir(d) {
		var st unix.Stat_t
		if err := unix.Stat(d, &st); err != nil {
			return err
		}
		if !may(&st, 1) {
			return fmt.Errorf("%s is mode %o, owner %d:%d", d, st.Mode&0o7777, st.Uid, st.Gid)
		}
		if d == "/" {
			break
		}
	}
	var st unix.Stat_t
	if err := unix.Stat(real, &st); err != nil {
		return err
	}
	bits := uint32(4)
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		bits = 5
	}
	if !may(&st, bits) {
		return fmt.Errorf("it is mode %o, owner %d:%d", st.Mode&0o7777, st.Uid, st.Gid)
	}
	return nil
}
