package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hpcq/hpcq/internal/nsinit"
	"github.com/hpcq/hpcq/pkg/schema"
)

// Isolation modes (HPCQ_ISOLATION).
const (
	// IsolationAuto uses namespaces where the machine allows them and runs
	// commands in a plain process group where it does not, saying so in
	// every result. The default.
	IsolationAuto = "auto"
	// IsolationRequired fails at start when namespaces cannot be had.
	IsolationRequired = "required"
	// IsolationOff runs commands in a plain process group.
	IsolationOff = "off"
)

// ErrIsolation is returned by NewSandbox when HPCQ_ISOLATION=required and
// the isolation cannot be had; the message says why.
var ErrIsolation = errors.New("isolation unavailable")

// SandboxConfig says how a worker isolates the commands of its tasks.
type SandboxConfig struct {
	// Mode is auto, required or off. Defaults to auto.
	Mode string
	// User the commands run as when the worker runs as root. Defaults to
	// "nobody". A worker that is not root runs them as itself.
	User string
	// Writable are directories besides the workspace that commands may
	// write (a shared package cache, say); everything else outside the
	// workspace, a private /tmp and /dev/shm is read-only.
	Writable []string
	// TmpMB bounds the private /tmp, /var/tmp and /dev/shm of a command
	// together (one tmpfs) when its task sets no memory limit [1024].
	TmpMB int
	// UIDs, "FIRST-LAST", gives each slot of a worker running as root a
	// uid (and group) of its own that no account uses, as container
	// runtimes use subordinate ids: a task cannot read another's files
	// even where the file system cannot be hidden, and RLIMIT_NPROC counts
	// its processes alone where no pids cgroup can be had. "": every task
	// runs as User.
	UIDs string
}

// Sandbox runs commands in their own PID and mount namespaces (and, when a
// task asks, their own network namespace): a command can neither see nor
// signal any process outside, everything it starts dies with it or with
// the worker, and the file system outside its workspace is read-only. A
// worker running as root runs commands as an unprivileged user. A nil
// *Sandbox runs commands in a plain process group.
//
// The namespaces are made by a helper (internal/nsinit), the new
// namespaces' first process: hpcq-sandbox beside the worker's executable
// when it is there, else the worker's own executable started again. It
// mounts a fresh /proc, makes the file system read-only but for the
// workspace, drops to the sandbox user and runs the command, or for a task
// attempt every command the executor sends it (session); when it ends,
// the kernel kills whatever is left in the namespace.
type Sandbox struct {
	helper   string // the helper's path
	uid, gid int    // the user commands run as; -1: the worker's own
	userNS   bool   // a user namespace maps the worker's user to root inside
	hideFS   bool
	userName string
	writable []string
	tmpMB    int       // the default bound of a command's /tmp, /var/tmp, /dev/shm
	slots    *slotUIDs // a uid per slot (nil: every task as uid)
	hide     string    // the runs directory: every workspace but the command's own is hidden
	note     string    // what could not be had, for every result

	nsMu   sync.Mutex
	idmaps map[[2]int]*os.File // the idmapping's user namespace per task user (idmapNS)
}

// NewSandbox finds out what isolation this machine allows by running a
// probe command through it. In auto mode it returns a nil *Sandbox (plain
// process groups) with the reason when no namespace can be made; in
// required mode that is an error wrapping ErrIsolation. reachDir is a
// directory (the runs directory) the sandbox user must be able to reach.
//
// Long: the probes from the strongest isolation to the weakest, each with
// the reason it failed kept for the note; the order is the point.
func NewSandbox(ctx context.Context, cfg SandboxConfig, reachDir string) (*Sandbox, string, error) {
	switch cfg.Mode {
	case "", IsolationAuto, IsolationRequired:
	case IsolationOff:
		return nil, "isolation is off (HPCQ_ISOLATION=off): commands run in a process group as the worker's user", nil
	default:
		return nil, "", fmt.Errorf("phases: HPCQ_ISOLATION=%q: must be auto, required or off", cfg.Mode)
	}
	fail := func(why string) (*Sandbox, string, error) {
		if cfg.Mode == IsolationRequired {
			return nil, "", fmt.Errorf("%w (HPCQ_ISOLATION=required): %s", ErrIsolation, why)
		}
		return nil, "no isolation: " + why + "; commands run in a process group as the worker's user", nil
	}
	s := &Sandbox{helper: helperPath(), uid: -1, gid: -1, hideFS: true, tmpMB: cfg.TmpMB}
	if s.tmpMB <= 0 {
		s.tmpMB = DefaultTmpMB
	}
	for _, w := range cfg.Writable {
		if !filepath.IsAbs(w) {
			return nil, "", fmt.Errorf("phases: sandbox writable directory %q: must be an absolute path", w)
		}
		s.writable = append(s.writable, filepath.Clean(w))
	}
	if os.Geteuid() == 0 {
		name := cfg.User
		if name == "" {
			name = "nobody"
		}
		uid, gid, err := lookupUser(name)
		if err != nil {
			return fail(err.Error())
		}
		if uid == 0 {
			return fail(fmt.Sprintf("sandbox user %q is root", name))
		}
		s.uid, s.gid, s.userName = uid, gid, fmt.Sprintf("%s (%d)", name, uid)
		first, count, err := parseUIDRange(cfg.UIDs)
		if err != nil {
			return nil, "", fmt.Errorf("phases: %w", err)
		}
		if count > 0 {
			s.slots = &slotUIDs{first: first, count: count}
		}
	} else {
		s.userNS = true
		u, err := user.Current()
		name := strconv.Itoa(os.Geteuid())
		if err == nil {
			name = u.Username
		}
		s.userName = fmt.Sprintf("%s (%d, the worker's user)", name, os.Geteuid())
		if strings.TrimSpace(cfg.UIDs) != "" {
			s.note = "HPCQ_SANDBOX_UIDS is for a worker running as root: every task runs as the worker's user"
		}
	}
	dir := reachDir
	if dir == "" {
		dir = os.TempDir()
	} else {
		s.hide = filepath.Clean(reachDir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", fmt.Errorf("phases: %w", err)
	}
	probe := func() error {
		var out bytes.Buffer
		w := &lockedWriter{w: &out}
		o, err := Run(ctx, Command{Line: "exit 0", Dir: dir, Env: []string{"PATH=/usr/bin:/bin"}, Timeout: 20 * time.Second,
			Stdout: w, Stderr: w, Sandbox: s, NoNetwork: true})
		if err != nil {
			return err
		}
		if o.ExitCode != 0 {
			return fmt.Errorf("exit status %d: %s", o.ExitCode, strings.TrimSpace(out.String()))
		}
		return nil
	}
	if err := probe(); err != nil {
		if !s.hideFS {
			return fail(fmt.Sprintf("cannot make namespaces: %v", err))
		}
		s.hideFS = false
		// Without its own mounts the sandbox user needs a way in.
		if s.uid >= 0 {
			abs, _ := filepath.Abs(dir)
			if d, uerr := nsinit.FirstClosed(abs, true, s.uid, s.gid); uerr != nil {
				return fail(fmt.Sprintf("the file system could not be hidden (%v) and the sandbox user %s cannot reach %s (%v): "+
					"use a runs directory it can reach or set HPCQ_SANDBOX_USER", err, s.userName, d, uerr))
			}
		}
		if err2 := probe(); err2 != nil {
			return fail(fmt.Sprintf("cannot make namespaces: %v", err2))
		}
		s.note = strings.TrimPrefix(s.note+"; "+fmt.Sprintf("the file system outside the workspace could not be made read-only (%v)", err), "; ")
		if cfg.Mode == IsolationRequired {
			return nil, "", fmt.Errorf("%w (HPCQ_ISOLATION=required): %s", ErrIsolation, s.note)
		}
	}
	return s, s.Describe(), nil
}

// Describe says in one line what a command run in s gets.
func (s *Sandbox) Describe() string {
	if s == nil {
		return "none: a process group as the worker's user"
	}
	d := "own PID and mount namespaces, as " + s.userName
	if s.slots != nil {
		d = fmt.Sprintf("own PID and mount namespaces, as a uid per slot (%d-%d, HPCQ_SANDBOX_UIDS; else %s)", s.slots.first, s.slots.first+s.slots.count-1, s.userName)
	}
	if s.hideFS {
		d += ", file system read-only outside the workspace"
	}
	if s.note != "" {
		d += "; " + s.note
	}
	if s.helper == "/proc/self/exe" {
		d += "; helper: this executable (install " + nsinit.Arg0 + " beside it to start commands faster)"
	} else {
		d += "; helper: " + s.helper
	}
	return d
}

// Isolation is what goes into a result: the isolation commands ran with,
// as u (nil: the sandbox user, why says why when the slot has no uid).
func (s *Sandbox) Isolation(noNetwork bool, none string, u *TaskUser, why string) *schema.Isolation {
	if s == nil {
		iso := &schema.Isolation{Mode: "none", User: currentUser(), Network: true, Note: none}
		if noNetwork {
			iso.Note = strings.TrimPrefix(iso.Note+"; ", "; ") + "the task asked for no network and it could not be taken away"
		}
		return iso
	}
	iso := &schema.Isolation{Mode: "namespaces", PIDNamespace: true, User: s.userName, FilesystemHidden: s.hideFS,
		Network: !noNetwork, Note: strings.TrimPrefix(s.note+"; "+why, "; ")}
	iso.Note = strings.TrimSuffix(iso.Note, "; ")
	if u != nil {
		iso.User = fmt.Sprintf("uid %d, gid %d (the slot's own, HPCQ_SANDBOX_UIDS)", u.UID, u.GID)
	}
	return iso
}

// ForSlot is the user of the tasks of slot i when the sandbox gives each
// slot a uid of its own; nil (the sandbox user) otherwise, with why when
// slot i should have had one.
func (s *Sandbox) ForSlot(i int) (*TaskUser, string) {
	if s == nil {
		return nil, ""
	}
	return s.slots.forSlot(i)
}

// ChownWorkspace gives the workspace the worker wrote to whom its
// commands run as: u, else the sandbox user.
func (s *Sandbox) ChownWorkspace(dir string, u *TaskUser) error {
	if s == nil || s.uid < 0 {
		return nil
	}
	uid, gid := s.uid, s.gid
	if u != nil {
		uid, gid = u.UID, u.GID
	}
	return filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// env is the environment of a command run as the sandbox user: HOME is its
// workspace, and the worker's USER and LOGNAME are left out.
func (s *Sandbox) env(env []string, dir string) []string {
	if s == nil || s.uid < 0 {
		return env
	}
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		if !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "USER=") && !strings.HasPrefix(kv, "LOGNAME=") {
			out = append(out, kv)
		}
	}
	return append(out, "HOME="+dir)
}

func currentUser() string {
	if u, err := user.Current(); err == nil {
		return fmt.Sprintf("%s (%s)", u.Username, u.Uid)
	}
	return strconv.Itoa(os.Geteuid())
}

func lookupUser(name string) (uid, gid int, err error) {
	u, err := user.Lookup(name)
	if err != nil {
		if id, aerr := strconv.Atoi(name); aerr == nil && id > 0 {
			return id, id, nil
		}
		return 0, 0, fmt.Errorf("sandbox user %q: %v", name, err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("sandbox user %q: ids %q/%q", name, u.Uid, u.Gid)
	}
	return uid, gid, nil
}

// sysProcAttr is how the helper is started: new namespaces, killed with
// the worker.
func (s *Sandbox) sysProcAttr(noNetwork bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL,
		Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS}
	if noNetwork {
		a.Cloneflags |= syscall.CLONE_NEWNET
	}
	if s.userNS {
		a.Cloneflags |= syscall.CLONE_NEWUSER
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
		a.GidMappingsEnableSetgroups = false
	}
	return a
}

// DefaultTmpMB bounds a command's /tmp, /var/tmp and /dev/shm together
// when neither the task nor the worker says.
const DefaultTmpMB = 1024

// TmpMB is the bound of a command's /tmp, /var/tmp and /dev/shm together:
// the task's memory limit (what it may hold in RAM), else the worker's.
func (s *Sandbox) TmpMB(memoryMB int) int {
	if memoryMB > 0 {
		return memoryMB
	}
	return s.tmpMB
}

// helperArgv is the helper's argv for c, or with serve for a session
// that runs commands like c (which keeps the network: a command without
// is given its own network namespace by the helper), and the files the
// helper is to inherit from descriptor firstFD on (the idmapping's user
// namespace of a container as a task user).
func (s *Sandbox) helperArgv(c Command, argv []string, serve bool, firstFD int) ([]string, []*os.File, error) {
	var hide []string
	if s.hide != "" {
		hide = []string{s.hide}
	}
	spec := nsinit.Spec{Dir: c.Dir, UID: s.uid, GID: s.gid, HideFS: s.hideFS, Writable: s.writable, Visible: c.Visible, NoNetwork: c.NoNetwork && !serve,
		TmpMB: c.TmpMB, Cgroups: c.JoinCgroups, Hide: hide, Serve: serve,
		Root: c.Root, Layers: c.Layers, Scaffold: c.Scaffold, Upper: c.Upper, Binds: c.Binds}
	if u := c.User; u != nil && s.uid >= 0 {
		spec.UID, spec.GID, spec.Nproc = u.UID, u.GID, u.Nproc
	}
	if s.userNS {
		spec.OwnUID, spec.OwnGID = os.Geteuid(), os.Getegid()
	}
	var extra []*os.File
	if spec.Root != "" && spec.UID >= 0 {
		// Without it the helper makes the namespace itself, as before.
		if ns := s.idmapNS(spec.UID, spec.GID); ns != nil {
			spec.UsernsFD, extra = firstFD, []*os.File{ns}
		}
	}
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, nil, err
	}
	return append([]string{nsinit.Arg0, string(js)}, argv...), extra, nil
}

// idmapNS is the user namespace mapping a container's root to uid:gid,
// made on the first container of that task user and kept (one per task
// user: at most one per slot); nil when it cannot be made (the helper then
// makes one per attempt).
func (s *Sandbox) idmapNS(uid, gid int) *os.File {
	s.nsMu.Lock()
	defer s.nsMu.Unlock()
	key := [2]int{uid, gid}
	if f, ok := s.idmaps[key]; ok {
		return f
	}
	f, err := nsinit.IDMapNamespace(s.helper, uid, gid)
	if err != nil {
		f = nil
	}
	if s.idmaps == nil {
		s.idmaps = map[[2]int]*os.File{}
	}
	s.idmaps[key] = f
	return f
}

// helperPath is hpcq-sandbox beside this executable, when it is a regular
// executable file only its owner (root or the worker's user) may change;
// else this executable, started again (/proc/self/exe), which costs its
// whole start-up (about 25 ms for the worker's) per command.
func helperPath() string {
	exe, err := os.Executable()
	if err != nil {
		return "/proc/self/exe"
	}
	p := filepath.Join(filepath.Dir(exe), nsinit.Arg0)
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o111 == 0 ||
		st.Mode&0o022 != 0 || (st.Uid != 0 && int(st.Uid) != os.Geteuid()) {
		return "/proc/self/exe"
	}
	return p
}

func init() {
	// The fallback helper: this executable started again (see helperPath).
	if nsinit.IsHelper() {
		nsinit.Exit(nsinit.Main(os.Args[1], os.Args[2:]))
	}
}
