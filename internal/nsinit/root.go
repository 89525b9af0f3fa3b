package nsinit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// stage is where the helper builds a container's root before it pivots
// into it: a tmpfs on the host's /tmp of the helper's own mount
// namespace (nothing of it shows outside), holding the overlay's upper
// and work directories and its mount point.
const stage = "/tmp"

// containerRoot makes spec.Root, an image's unpacked root file system,
// the commands' root: an overlay (overlayRoot) of the image and the layers
// above it, never written, whose upper layer takes what the commands write
// (the mount points below are made there);
// the workspace at its own path, and the writable directories; a fresh
// /proc (mounted here, before the pivot), the host's /dev, read-only /sys; /tmp, /var/tmp and /dev/shm a
// tmpfs of TmpMB; the host's resolv.conf and hosts for the download
// phase's network. Then pivot_root: nothing of the host's file system is
// left to see but what is bound in.
func containerRoot(spec Spec) error {
	keep, trees, err := writableTrees(spec)
	defer closeAll(trees)
	if err != nil {
		return err
	}
	binds, err := bindTrees(spec.Binds)
	defer closeAll(binds)
	if err != nil {
		return err
	}
	mb := tmpMB(spec)
	root, fds, err := overlayRoot(spec)
	defer closeAll(fds)
	if err != nil {
		return err
	}
	if containerUser(spec) {
		// What this helper makes in the container (mount points, the
		// workspace's path) it makes as the container's root (the task's
		// user): through the idmapped layers the host's root is no one.
		// fsuid is a thread's.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		_ = unix.Setfsgid(spec.GID)
		_ = unix.Setfsuid(spec.UID)
		defer func() { _ = unix.Setfsuid(0); _ = unix.Setfsgid(0) }()
	}
	in := func(p string) string { return filepath.Join(root, p) }
	for _, d := range []string{"/proc", "/dev", "/sys", "/tmp", "/var/tmp", "/dev/shm"} {
		if err := os.MkdirAll(in(d), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("container: %s: %w", d, err)
		}
	}
	if err := unix.Mount("/dev", in("/dev"), "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("container: /dev: %w", err)
	}
	if err := unix.Mount("/sys", in("/sys"), "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("container: /sys: %w", err)
	}
	ro := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(unix.AT_FDCWD, in("/sys"), unix.AT_RECURSIVE, &ro); err != nil {
		return fmt.Errorf("container: /sys read-only: %w", err)
	}
	for _, f := range []string{"/etc/resolv.conf", "/etc/hosts"} {
		if err := bindFile(f, in(f)); err != nil {
			return fmt.Errorf("container: %s: %w", f, err)
		}
	}
	for i, b := range spec.Binds {
		if err := bindTree(binds[i], in(b.Dst)); err != nil {
			return fmt.Errorf("container: bind %s: %w", b.Src, err)
		}
	}
	if err := boundedTmp(mb, []string{in("/tmp"), in("/var/tmp"), in("/dev/shm")}); err != nil {
		return err
	}
	// /proc of the new PID namespace, mounted while the host's is still in
	// view: in a user namespace (a worker not running as root) the kernel
	// lets proc be mounted only where a proc mount is already visible.
	if err := unix.Mount("proc", in("/proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("container: mount /proc: %w", err)
	}
	for i, p := range keep {
		if err := os.MkdirAll(in(p), 0o755); err != nil {
			return fmt.Errorf("container: workspace %s: %w", p, err)
		}
		if err := unix.MoveMount(trees[i], "", unix.AT_FDCWD, in(p), unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("container: workspace %s: %w", p, err)
		}
	}
	return pivot(root)
}

// bindFile binds the host's file src at dst, made in the overlay when the
// image has none; a host without src binds nothing.
func bindFile(src, dst string) error {
	if _, err := os.Stat(src); err != nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if fi, err := os.Lstat(dst); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		// A link (Debian's resolv.conf may be one) would be followed out
		// of the root: replaced, in the overlay, by the file itself.
		if err := os.Remove(dst); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_RDONLY, 0o644)
	if err != nil {
		return err
	}
	f.Close()
	return unix.Mount(src, dst, "", unix.MS_BIND, "")
}

// bindTrees are detached read-only copies of the files to bind, taken
// before the stage's tmpfs may cover their paths; the descriptors are the
// caller's to close, whatever the error.
func bindTrees(binds []Bind) ([]int, error) {
	srcs := make([]string, len(binds))
	for i, b := range binds {
		srcs[i] = b.Src
	}
	trees, err := cloneTrees(srcs)
	if err != nil {
		return trees, fmt.Errorf("container: bind %w", err)
	}
	ro := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	for _, fd := range trees {
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &ro); err != nil {
			return trees, fmt.Errorf("container: bind read-only: %w", err)
		}
	}
	return trees, nil
}

// bindTree moves tree, a detached copy of a file, onto dst, made in the
// overlay (with its directories) when the image has none.
func bindTree(tree int, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_RDONLY, 0o644)
	if err != nil {
		return err
	}
	f.Close()
	return unix.MoveMount(tree, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH)
}

// pivot makes root the process's root and detaches the old one.
func pivot(root string) error {
	old := filepath.Join(root, ".hpcq-old-root")
	// A scaffold has it: not made, and not removed (that would write a
	// whiteout into the layer).
	made := true
	if err := os.Mkdir(old, 0o700); errors.Is(err, fs.ErrExist) {
		made = false
	} else if err != nil {
		return fmt.Errorf("container: %w", err)
	}
	if err := unix.PivotRoot(root, old); err != nil {
		return fmt.Errorf("container: pivot_root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return fmt.Errorf("container: %w", err)
	}
	if err := unix.Unmount("/.hpcq-old-root", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("container: detach the host's root: %w", err)
	}
	if !made {
		return nil
	}
	if err := os.Remove("/.hpcq-old-root"); err != nil {
		return fmt.Errorf("container: %w", err)
	}
	return nil
}

// overlayRoot mounts the container's root file system at stage/root: an
// overlay whose lower layers are the image and spec.Layers (the nearest
// last), named by descriptors (the stage's tmpfs may cover their paths),
// and whose upper layer is spec.Upper's upper and work directories (made
// by the worker), else the stage's tmpfs. With containerUser, the lower
// and upper layers are idmapped mounts: the disk's root is the task's
// user, who is the container's root. The options keep the upper layer a
// plain tree (no redirects, no metadata-only copies), one that can be
// packed as an image layer. The descriptors are the caller's to close.
func overlayRoot(spec Spec) (string, []int, error) {
	// The lowers, the oldest first (the image, its layers, the scaffold),
	// then the upper layer's directory.
	lows := append([]string{spec.Root}, spec.Layers...)
	if spec.Scaffold != "" {
		lows = append(lows, spec.Scaffold)
	}
	dirs := lows
	if spec.Upper != "" {
		dirs = append(dirs[:len(lows):len(lows)], spec.Upper)
	}
	fds, paths, err := openLayers(dirs)
	opened := slices.Clone(fds)
	if err != nil {
		return "", fds, err
	}
	if err := unix.Mount("tmpfs", stage, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%dm,mode=0755", tmpMB(spec))); err != nil {
		return "", fds, fmt.Errorf("container: stage: %w", err)
	}
	if containerUser(spec) {
		// The image and the layers below, not the upper layer: the overlay
		// writes that as the helper (root), who is no one through an
		// idmapping; the worker gives root's back when it keeps the layer.
		mapped, err := idmapAll(spec, dirs[:len(lows)], opened)
		fds = append(fds, mapped...)
		if err != nil {
			return "", fds, fmt.Errorf("container: %w", err)
		}
		for i, fd := range mapped {
			paths[i] = fmt.Sprintf("/proc/self/fd/%d", fd)
		}
	}
	path := func(i int) string { return paths[i] }
	lowers := []string{}
	for i := len(lows) - 1; i >= 0; i-- { // the nearest layer first, the image last
		lowers = append(lowers, path(i))
	}
	upper, work, root := filepath.Join(stage, "upper"), filepath.Join(stage, "work"), filepath.Join(stage, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		return "", fds, fmt.Errorf("container: %w", err)
	}
	opts := ",redirect_dir=off,index=off,metacopy=off"
	if spec.UID < 0 {
		// In a user namespace (a worker not running as root): trusted.*
		// cannot be written, and those options are refused; the kernel
		// keeps them off there.
		opts = ",userxattr"
	}
	if spec.Upper != "" {
		dir := path(len(dirs) - 1)
		upper, work = filepath.Join(dir, "upper"), filepath.Join(dir, "work")
	} else {
		for _, d := range []string{upper, work} {
			if err := os.Mkdir(d, 0o755); err != nil {
				return "", fds, fmt.Errorf("container: %w", err)
			}
		}
	}
	if containerUser(spec) {
		// The upper layer is the task user's: what the commands write is
		// theirs (the worker gives root's back when it keeps the layer).
		if err := os.Chown(upper, spec.UID, spec.GID); err != nil {
			return "", fds, fmt.Errorf("container: %w", err)
		}
	}
	all := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s%s", strings.Join(lowers, ":"), upper, work, opts)
	if err := unix.Mount("overlay", root, "overlay", unix.MS_NOSUID|unix.MS_NODEV, all); err != nil {
		return "", fds, fmt.Errorf("container: overlay on the image %s: %w", spec.Root, err)
	}
	return root, fds, nil
}

// openLayers opens each of dirs (as O_PATH descriptors, before the
// stage's tmpfs may cover their paths) and names each by its descriptor;
// the descriptors opened are the caller's to close, whatever the error.
func openLayers(dirs []string) (fds []int, paths []string, err error) {
	for _, d := range dirs {
		fd, err := unix.Open(d, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fds, paths, fmt.Errorf("container: %s: %w", d, err)
		}
		fds, paths = append(fds, fd), append(paths, fmt.Sprintf("/proc/self/fd/%d", fd))
	}
	return fds, paths, nil
}

// tmpMB is the bound of a container's /tmp, /var/tmp and /dev/shm, and of
// its writes over the image when they are not kept on disk.
func tmpMB(spec Spec) int {
	if spec.TmpMB > 0 {
		return spec.TmpMB
	}
	return 64
}
