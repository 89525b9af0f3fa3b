package nsinit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// stage is where the helper builds a container's root before it pivots
// into it: a tmpfs on the host's /tmp of the helper's own mount
// namespace (nothing of it shows outside), holding the overlay's upper
// and work directories and its mount point.
const stage = "/tmp"

// containerRoot makes spec.Root, an image's unpacked root file system,
// the commands' root: an overlay whose lower layer is the image (never
// written: the cache's tree is shared by every task) and whose upper layer
// is a tmpfs of spec.TmpMB (64 MB when unset), so that a command may write
// where the image lets its user (the mount points below are made there);
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
	// The image is named by a descriptor: the stage's tmpfs may cover its
	// path (an image under /tmp).
	image, err := unix.Open(spec.Root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("container: the image %s: %w", spec.Root, err)
	}
	defer unix.Close(image)
	mb := spec.TmpMB
	if mb <= 0 {
		mb = 64
	}
	if err := unix.Mount("tmpfs", stage, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%dm,mode=0700", mb)); err != nil {
		return fmt.Errorf("container: stage: %w", err)
	}
	upper, work, root := filepath.Join(stage, "upper"), filepath.Join(stage, "work"), filepath.Join(stage, "root")
	for _, d := range []string{upper, work, root} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("container: %w", err)
		}
	}
	opts := fmt.Sprintf("lowerdir=/proc/self/fd/%d,upperdir=%s,workdir=%s", image, upper, work)
	if err := unix.Mount("overlay", root, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("container: overlay on the image %s: %w", spec.Root, err)
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

// pivot makes root the process's root and detaches the old one.
func pivot(root string) error {
	old := filepath.Join(root, ".hpcq-old-root")
	if err := os.Mkdir(old, 0o700); err != nil {
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
	if err := os.Remove("/.hpcq-old-root"); err != nil {
		return fmt.Errorf("container: %w", err)
	}
	return nil
}
