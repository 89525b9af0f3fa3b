package nsinit

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// holdArg, as the helper's argv[1], makes it a process that only holds a
// user namespace open until its stdin closes (see userNamespace).
const holdArg = "hold-user-namespace"

// hold is the helper started with holdArg.
func hold() int {
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// containerUser reports whether a container's commands run as its root
// mapped to spec.UID/GID through a user namespace of their own: with a
// worker running as root (spec.UID >= 0). A worker that is not root runs
// the helper itself in a user namespace that maps it to root, and the
// commands run as that root.
func containerUser(spec Spec) bool { return spec.Root != "" && spec.UID >= 0 }

// rootMap maps the container's root to spec.UID/GID, and nothing else:
// the one id a task's user has (as `unshare -r`, Apptainer's --fakeroot
// without subordinate ids, or Charliecloud).
func rootMap(spec Spec) (uids, gids []syscall.SysProcIDMap) {
	return []syscall.SysProcIDMap{{ContainerID: 0, HostID: spec.UID, Size: 1}},
		[]syscall.SysProcIDMap{{ContainerID: 0, HostID: spec.GID, Size: 1}}
}

// userNamespace is a user namespace of rootMap(spec), as a descriptor the
// caller closes: the idmapping of the image's and layers' mounts. It is
// made by a process started in it (the helper again, holding it until its
// stdin closes), with a proc of this helper's PID namespace mounted over
// /proc meanwhile: the host's does not show its children by their pids
// here, and the runtime writes the new namespace's maps through /proc.
func userNamespace(spec Spec) (int, error) {
	const procDir = "/proc"
	if err := unix.Mount("proc", procDir, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return -1, fmt.Errorf("proc for the user namespace: %w", err)
	}
	defer func() { _ = unix.Unmount(procDir, unix.MNT_DETACH) }()
	r, w, err := os.Pipe()
	if err != nil {
		return -1, err
	}
	defer w.Close()
	uids, gids := rootMap(spec)
	p, err := os.StartProcess("/proc/self/exe", []string{Arg0, holdArg}, &os.ProcAttr{
		Env: []string{Env + "=1"}, Files: []*os.File{r, nil, nil},
		Sys: &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER, UidMappings: uids, GidMappings: gids},
	})
	r.Close()
	if err != nil {
		return -1, fmt.Errorf("user namespace for the image's ids: %w", err)
	}
	defer func() { w.Close(); _, _ = p.Wait() }()
	fd, err := unix.Open(filepath.Join(procDir, strconv.Itoa(p.Pid), "ns/user"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("user namespace for the image's ids: %w", err)
	}
	return fd, nil
}

// idmapped is a detached mount of dirFD (dir) whose ids are seen through userns:
// a file the disk says is root's is the task user's (rootMap), and what
// that user creates is stored as root's. The descriptor is the caller's.
func idmapped(dirFD int, dir string, userns int) (int, error) {
	fd, err := unix.OpenTree(dirFD, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return -1, fmt.Errorf("%s: %w", dir, err)
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(userns)}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("idmapped mount of %s (Linux 5.19 or later on a file system that allows it): %w", dir, err)
	}
	return fd, nil
}

// idmapAll is an idmapped mount (idmapped) of each of dirs, opened as fds,
// through a user namespace of rootMap(spec); the descriptors made are the
// caller's to close, whatever the error.
func idmapAll(spec Spec, dirs []string, fds []int) ([]int, error) {
	userns := spec.UsernsFD
	if userns <= 0 {
		var err error
		if userns, err = userNamespace(spec); err != nil {
			return nil, err
		}
		defer unix.Close(userns)
	}
	var out []int
	for i, d := range dirs {
		fd, err := idmapped(fds[i], d, userns)
		if err != nil {
			return out, err
		}
		out = append(out, fd)
	}
	return out, nil
}

// IDMapNamespace is a user namespace that maps root to uid:gid and nothing
// else (rootMap), as a descriptor the caller keeps: what a worker gives
// the helper of every container attempt of that task user (Spec.UsernsFD),
// so that no attempt pays for a process started to make one (about 2.5 ms
// of a container's 4.5 ms set-up). It is made by helper (the sandbox
// helper's path) started in it, holding it until its stdin closes; the
// descriptor keeps the namespace once that process is gone.
func IDMapNamespace(helper string, uid, gid int) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	uids, gids := rootMap(Spec{UID: uid, GID: gid})
	p, err := os.StartProcess(helper, []string{Arg0, holdArg}, &os.ProcAttr{
		Env: []string{Env + "=1"}, Files: []*os.File{r, nil, nil},
		Sys: &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER, UidMappings: uids, GidMappings: gids, Pdeathsig: syscall.SIGKILL},
	})
	r.Close()
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("user namespace for the ids %d:%d: %w", uid, gid, err)
	}
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(p.Pid), "ns/user"))
	w.Close()
	_, _ = p.Wait()
	if err != nil {
		return nil, fmt.Errorf("user namespace for the ids %d:%d: %w", uid, gid, err)
	}
	return f, nil
}
