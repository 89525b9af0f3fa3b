// Package nsinit is the sandbox helper of hpcq workers: the first process
// of a task attempt's new namespaces. It sets them up (private mounts, the
// file system read-only but the workspace, fresh /tmp and /proc, loopback),
// runs the attempt's commands as the sandbox user (one given in argv, or
// each the worker sends: see serve), passes signals on, reaps orphans and
// returns the commands' status. It is kept small, with no dependency beyond
// the standard library and x/sys, so that cmd/hpcq-sandbox starts in about
// a millisecond: it runs once per task attempt.
package nsinit

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Env marks the helper's process; Arg0 is its argv[0].
const (
	Env  = "HPCQ_SANDBOX_INIT"
	Arg0 = "hpcq-sandbox"
)

// Spec is what the helper is told, as JSON in its argv[1].
type Spec struct {
	Dir       string   `json:"dir"`
	UID       int      `json:"uid"`
	GID       int      `json:"gid"`
	HideFS    bool     `json:"hide_fs"`
	Writable  []string `json:"writable,omitempty"`
	NoNetwork bool     `json:"no_network,omitempty"`
	// TmpMB bounds /tmp, /var/tmp and /dev/shm together: one tmpfs of
	// that size shows in all three (0: each its own, unbounded).
	TmpMB int `json:"tmp_mb,omitempty"`
	// Cgroups are cgroup.procs files (cgroup v1) the helper joins before
	// anything else: what it starts is in them from its first instruction.
	Cgroups []string `json:"cgroups,omitempty"`
	// Hide are directories covered with an empty one (with HideFS), the
	// workspace and the writable directories under them put back: the
	// worker's runs directory, so that a command sees no other task's
	// workspace, log or run.
	Hide []string `json:"hide,omitempty"`
	// Nproc, when > 0, is the command's RLIMIT_NPROC: the processes its
	// uid may have (a uid no other task shares; see executor.TaskUser).
	Nproc int `json:"nproc,omitempty"`
	// Serve runs the commands a worker sends over ServeFD, one at a time,
	// rather than argv: one sandbox per task attempt.
	Serve bool `json:"serve,omitempty"`
	// Root, when set, is a container image's root file system: the
	// commands run in it, the workspace and the writable directories bound
	// in at their own paths, nothing else of the host's file system seen
	// (containerRoot). HideFS and Hide have nothing left to hide then.
	Root string `json:"root,omitempty"`
	// Layers, with Root, are layers over the image, the oldest first:
	// directories holding what the commands of the nodes above this one
	// wrote (their Upper's upper directories), read-only here.
	Layers []string `json:"layers,omitempty"`
	// Binds, with Root, are host files bound read-only in the container
	// (the GPU driver's libraries and tools); their directories are made.
	Binds []Bind `json:"binds,omitempty"`
	// Visible are directories put back read-only where HideFS hides the
	// file system: the image tree a site's container runtime reads.
	Visible []string `json:"visible,omitempty"`
	// OwnUID and OwnGID, for a worker that is not root (whose helper is
	// root only of a user namespace mapping its own ids to 0), are those
	// ids: the commands on the host's file system run as them again, in a
	// user namespace of their own mapping them back, so that what they ask
	// others in their own name (Slurm's srun, a job step) is who they are.
	OwnUID int `json:"own_uid,omitempty"`
	OwnGID int `json:"own_gid,omitempty"`
	// Upper, with Root, is a directory whose upper and work directories
	// (made by the worker, empty) take what the commands write: the node's
	// layer, kept on disk. "": a tmpfs of TmpMB takes it, lost at the end.
	Upper string `json:"upper,omitempty"`
	// Scaffold, with Root, is a directory of the mount points the helper
	// makes in the container (executor's scaffold), laid over Layers as
	// the nearest lower layer: found there, they are not written into the
	// upper layer on disk.
	Scaffold string `json:"scaffold,omitempty"`
	// UsernsFD, when > 0, is a descriptor the helper inherits of a user
	// namespace of rootMap(spec) (IDMapNamespace: the worker makes one per
	// task user and keeps it): the idmapping of the image's and layers'
	// mounts uses it instead of a namespace made for the attempt.
	UsernsFD int `json:"userns_fd,omitempty"`
}

// Bind is a host file bound in a container.
type Bind struct {
	Src string `json:"src"`
	Dst string `json:"dst"`
}

// IsHelper reports whether this process was started as the helper.
func IsHelper() bool {
	return os.Getenv(Env) == "1" && len(os.Args) > 1 && os.Args[0] == Arg0
}

// Exit ends the helper with code: the exit_group system call itself, not
// os.Exit, whose exit hooks the helper has no use for (it buffers nothing)
// and whose race-detector hook waits a second (GORACE atexit_sleep_ms) in
// every command a race-enabled test binary starts as its own helper.
func Exit(code int) {
	unix.Exit(code)
}

// Main is the helper's main: the first process of the new PID
// namespace. It sets the namespace up (setupSandbox), then runs argv as
// the sandbox user, or with Spec.Serve the commands the worker sends (see
// serve); it passes SIGTERM, SIGINT and SIGHUP on to every process of the
// namespace, reaps what is orphaned, and returns the command's exit
// status (128+signal when a signal ended it). When it returns, the kernel
// kills whatever is left in the namespace. Status 125 means the sandbox
// could not be set up; the reason is on stderr.
func Main(specJSON string, argv []string) int {
	if specJSON == holdArg {
		return hold()
	}
	var spec Spec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "hpcq-sandbox: bad spec: %v\n", err)
		return 125
	}
	if spec.UsernsFD > 0 {
		// The worker's user namespace is the helper's to use, never a
		// command's.
		unix.CloseOnExec(spec.UsernsFD)
	}
	if err := setupSandbox(spec); err != nil {
		fmt.Fprintf(os.Stderr, "hpcq-sandbox: %v\n", err)
		return 125
	}
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, Env+"=") {
			env = append(env, kv)
		}
	}
	if spec.Nproc > 0 {
		// Inherited by the commands; root (this process) is not held to it.
		lim := unix.Rlimit{Cur: uint64(spec.Nproc), Max: uint64(spec.Nproc)}
		if err := unix.Setrlimit(unix.RLIMIT_NPROC, &lim); err != nil {
			fmt.Fprintf(os.Stderr, "hpcq-sandbox: RLIMIT_NPROC %d: %v\n", spec.Nproc, err)
			return 125
		}
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		for s := range sigs {
			_ = unix.Kill(-1, s.(syscall.Signal)) // every process of the namespace but this one
		}
	}()
	if spec.Serve {
		return serve(spec, env)
	}
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "hpcq-sandbox: no command")
		return 125
	}
	attr := &os.ProcAttr{Env: env, Files: []*os.File{os.Stdin, os.Stdout, os.Stderr}, Sys: commandAttr(spec)}
	p, err := os.StartProcess(argv[0], argv, attr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "hpcq-sandbox: start %s: %v\n", argv[0], err)
		return 126
	}
	code := reapUntil(p.Pid)
	if spec.HideFS || spec.Root != "" {
		reportTmpFull(os.Stderr, spec.TmpMB)
	}
	return code
}

// commandAttr is how a command starts: as the sandbox user, or in a
// container as its root (containerUser).
func commandAttr(spec Spec) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{}
	switch {
	case containerUser(spec):
		// A user namespace of its own in which it becomes root: its ids
		// on the host are then the task user's (this helper's are root's,
		// which the namespace does not map).
		a.Cloneflags = unix.CLONE_NEWUSER
		a.UidMappings, a.GidMappings = rootMap(spec)
		a.GidMappingsEnableSetgroups = true
		a.Credential = &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}}
	case spec.UID >= 0:
		a.Credential = &syscall.Credential{Uid: uint32(spec.UID), Gid: uint32(spec.GID), Groups: []uint32{}}
	case spec.Root == "" && spec.OwnUID > 0:
		// The helper's root is the worker's user: map that back.
		a.Cloneflags = unix.CLONE_NEWUSER
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: spec.OwnUID, HostID: 0, Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: spec.OwnGID, HostID: 0, Size: 1}}
		a.Credential = &syscall.Credential{Uid: uint32(spec.OwnUID), Gid: uint32(spec.OwnGID), NoSetGroups: true}
	}
	return a
}

// setupSandbox runs in the helper, as root of its namespaces, before the
// command: private mounts; with HideFS, everything read-only but the
// workspace and the writable directories, fresh /tmp, /var/tmp and
// /dev/shm, and directories the sandbox user could not pass through
// replaced by empty ones holding just the paths it needs; a fresh /proc
// that shows the namespace's processes only; the loopback interface up in
// a new network namespace; the working directory.
func setupSandbox(spec Spec) error {
	for _, procs := range spec.Cgroups {
		// "0": this process, whatever its pid is outside the namespace.
		if err := os.WriteFile(procs, []byte("0"), 0); err != nil {
			return fmt.Errorf("join cgroup %s: %w", filepath.Dir(procs), err)
		}
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	switch {
	case spec.Root != "":
		if err := containerRoot(spec); err != nil {
			return err
		}
	case spec.HideFS:
		if err := hideFS(spec); err != nil {
			return err
		}
	}
	if spec.Root == "" { // a container's is mounted before its pivot
		if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("mount /proc: %w", err)
		}
	}
	if spec.NoNetwork {
		if err := loopbackUp(); err != nil {
			return fmt.Errorf("loopback: %w", err)
		}
	}
	if err := unix.Chdir(spec.Dir); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	return nil
}

func hideFS(spec Spec) error {
	// Detached copies of the writable trees, taken before anything is made
	// read-only or covered.
	keep, trees, err := writableTrees(spec)
	defer closeAll(trees)
	if err != nil {
		return err
	}
	// The visible directories are put back with the writable ones,
	// read-only.
	vis, err := cloneTrees(spec.Visible)
	defer closeAll(vis)
	if err != nil {
		return fmt.Errorf("visible %w", err)
	}
	ro := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	for _, fd := range vis {
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &ro); err != nil {
			return fmt.Errorf("visible directory read-only: %w", err)
		}
	}
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, &ro); err != nil {
		return fmt.Errorf("read-only file system: %w", err)
	}
	covers := []string{"/tmp", "/var/tmp", "/dev/shm"}
	var done []string
	if spec.TmpMB > 0 {
		if err := boundedTmp(spec.TmpMB, covers); err != nil {
			return err
		}
		done = append(done, covers...)
	}
	if spec.UID >= 0 {
		for _, p := range append(keep, spec.Visible...) {
			if d, _ := FirstClosed(p, false, spec.UID, spec.GID); d != "" {
				covers = append(covers, d)
			}
		}
	}
	covers = append(covers, spec.Hide...)
	sort.Strings(covers)
	for _, c := range covers {
		if under(c, done) {
			continue
		}
		if fi, err := os.Stat(c); err != nil || !fi.IsDir() {
			continue
		}
		mode := "mode=1777"
		if c != "/tmp" && c != "/var/tmp" && c != "/dev/shm" {
			mode = "mode=0755"
		}
		if err := unix.Mount("tmpfs", c, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, mode); err != nil {
			return fmt.Errorf("cover %s: %w", c, err)
		}
		done = append(done, c)
	}
	for i, p := range keep {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return fmt.Errorf("writable %s: %w", p, err)
		}
		if err := unix.MoveMount(trees[i], "", unix.AT_FDCWD, p, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("writable %s: %w", p, err)
		}
	}
	for i, p := range spec.Visible {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return fmt.Errorf("visible %s: %w", p, err)
		}
		if err := unix.MoveMount(vis[i], "", unix.AT_FDCWD, p, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("visible %s: %w", p, err)
		}
	}
	return nil
}

// writableTrees are the workspace and the writable directories, and a
// detached copy of each (open_tree clones, to move back in place once the
// rest is read-only, covered or pivoted away). The descriptors are the
// caller's to close, whatever the error.
func writableTrees(spec Spec) ([]string, []int, error) {
	keep := append([]string{spec.Dir}, spec.Writable...)
	trees, err := cloneTrees(keep)
	if err != nil {
		err = fmt.Errorf("writable %w", err)
	}
	return keep, trees, err
}

// cloneTrees are detached copies (open_tree clones) of the trees at
// paths, the caller's to close whatever the error.
func cloneTrees(paths []string) ([]int, error) {
	trees := make([]int, 0, len(paths))
	for _, p := range paths {
		fd, err := unix.OpenTree(unix.AT_FDCWD, p, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return trees, fmt.Errorf("%s: %w", p, err)
		}
		trees = append(trees, fd)
	}
	return trees, nil
}

// boundedTmp mounts one tmpfs of mb megabytes and shows a directory of
// it at each of dirs (mode 1777): what a command writes to /tmp, /var/tmp
// and /dev/shm together is bounded, where three tmpfs of their own could
// each take half the machine's memory. The mount is made detached (fsopen,
// fsmount), so its directories appear nowhere else.
func boundedTmp(mb int, dirs []string) error {
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("bounded /tmp: fsopen: %w", err)
	}
	defer unix.Close(fs)
	if err := unix.FsconfigSetString(fs, "size", fmt.Sprintf("%dm", mb)); err != nil {
		return fmt.Errorf("bounded /tmp: size %d MB: %w", mb, err)
	}
	if err := unix.FsconfigSetString(fs, "mode", "0755"); err != nil {
		return fmt.Errorf("bounded /tmp: %w", err)
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return fmt.Errorf("bounded /tmp: create: %w", err)
	}
	mnt, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return fmt.Errorf("bounded /tmp: fsmount: %w", err)
	}
	defer unix.Close(mnt)
	for _, d := range dirs {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			continue
		}
		name := strings.Trim(strings.ReplaceAll(d, "/", "-"), "-")
		if err := unix.Mkdirat(mnt, name, 0o700); err != nil {
			return fmt.Errorf("bounded %s: %w", d, err)
		}
		if err := unix.Fchmodat(mnt, name, 0o1777, 0); err != nil {
			return fmt.Errorf("bounded %s: %w", d, err)
		}
		tree, err := unix.OpenTree(mnt, name, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return fmt.Errorf("bounded %s: %w", d, err)
		}
		err = unix.MoveMount(tree, "", unix.AT_FDCWD, d, unix.MOVE_MOUNT_F_EMPTY_PATH)
		unix.Close(tree)
		if err != nil {
			return fmt.Errorf("bounded %s: %w", d, err)
		}
	}
	return nil
}

// TmpFull is the line the helper writes on stderr when a command's
// bounded /tmp, /var/tmp and /dev/shm were full as it ended.
const TmpFull = "hpcq-sandbox: /tmp, /var/tmp and /dev/shm (one tmpfs"

// reportTmpFull says so on w (the command's stderr) when the bounded /tmp
// is full: writes there failed (ENOSPC) and the phase's failure is likely
// that.
func reportTmpFull(w io.Writer, mb int) {
	var st unix.Statfs_t
	if mb <= 0 || unix.Statfs("/tmp", &st) != nil {
		return
	}
	if free := st.Bavail * uint64(st.Bsize); free < 1<<20 {
		fmt.Fprintf(w, "%s of %d MB) were full: writes there failed (the bound is the task's limits.memory_mb, else the worker's HPCQ_SANDBOX_TMP_MB)\n", TmpFull, mb)
	}
}

// under reports whether p is one of dirs or below one.
func under(p string, dirs []string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// loopbackUp brings lo up in a new network namespace, so programs that
// talk to themselves over 127.0.0.1 (MPI among them) still work.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// FirstClosed is the outermost directory on the way to p (p's ancestors,
// and p itself with self) that uid/gid may not search, with why; "" when
// every one is open to them.
func FirstClosed(p string, self bool, uid, gid int) (string, error) {
	var dirs []string
	if self {
		dirs = append(dirs, p)
	}
	for d := filepath.Dir(p); d != "/" && d != "."; d = filepath.Dir(d) {
		dirs = append(dirs, d)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		var st unix.Stat_t
		if err := unix.Stat(dirs[i], &st); err != nil {
			return dirs[i], err
		}
		m := st.Mode
		if m&0o001 == 0 && !(int(st.Uid) == uid && m&0o100 != 0) && !(int(st.Gid) == gid && m&0o010 != 0) {
			return dirs[i], fmt.Errorf("mode %v, owner %d:%d", os.FileMode(m).Perm(), st.Uid, st.Gid)
		}
	}
	return "", nil
}
