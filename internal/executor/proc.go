package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hpcq/hpcq/internal/nsinit"
)

// Command is one shell command line, run with bash -c (or bash -lc) in its
// own process group.
type Command struct {
	// Line is the command line passed to bash -lc.
	Line string
	// Dir is the working directory.
	Dir string
	// Env is the complete environment of the command.
	Env []string
	// Timeout bounds the command; 0 means no timeout (ctx still applies).
	Timeout time.Duration
	// KillGrace is how long the process group has between SIGTERM and
	// SIGKILL once the timeout fires or ctx ends. Defaults to 5s.
	KillGrace time.Duration
	// Stdout and Stderr receive the command's output streams (nil:
	// discarded). They are written from two goroutines: one writer given for
	// both must be safe for concurrent use.
	Stdout, Stderr io.Writer
	// Rlimits applied to the command and everything it starts.
	Rlimits Rlimits
	// Sandbox runs the command in its own namespaces as the sandbox user;
	// nil runs it in a process group as the worker's user.
	Sandbox *Sandbox
	// NoNetwork takes the network away (with a Sandbox only).
	NoNetwork bool
	// TmpMB bounds the private /tmp, /var/tmp and /dev/shm together (with a
	// Sandbox only; 0: unbounded).
	TmpMB int
	// Login runs the line in a login shell (bash -lc) rather than bash -c:
	// for environments the worker did not capture (see CaptureLoginEnv).
	Login bool
	// CPUs, when set, bind the command and everything it starts to those
	// CPUs (its affinity, inherited).
	CPUs []int
	// CgroupFD, when > 0, is a cgroup v2 directory the command starts in.
	CgroupFD int
	// JoinCgroups are cgroup.procs files (cgroup v1) the sandbox helper
	// joins before it starts the command (with a Sandbox only).
	JoinCgroups []string
	// User runs the command (with a Sandbox of a worker running as root
	// only); nil: the sandbox user.
	User *TaskUser
	// Root, when set, is a container image's root file system the command
	// runs in (with a Sandbox only): its shell is the image's (bash when
	// the image has it, else sh), its PATH the image's standard one; it
	// runs as the container's root, mapped to the task's user.
	Root string
	// Layers are layers over Root (the oldest first) and Upper the
	// directory whose upper and work directories take what the command
	// writes there (see nsinit.Spec).
	Layers []string
	Upper  string
	// Binds are host files bound read-only in the container (Root): the
	// GPU driver's (gpuBinds), named by LD_LIBRARY_PATH and PATH.
	Binds []nsinit.Bind
	// Scaffold, with Root, is the tree of mount points laid over the
	// layers (scaffold.go).
	Scaffold string
	// Visible are directories the sandbox shows read-only where it hides
	// the file system: the image a site's container runtime (Apptainer,
	// Charliecloud...) called by the line reads.
	Visible []string
}

// shellArgv is the argv c's line runs as.
func (c Command) shellArgv() []string {
	line := c.Rlimits.script(c.Line)
	if c.Root == "" {
		return ShellArgv(line, c.Login)
	}
	sh := "/bin/sh"
	if fi, err := os.Stat(filepath.Join(c.Root, "bin/bash")); err == nil && fi.Mode().IsRegular() {
		sh = "/bin/bash"
	}
	if c.Login {
		return []string{sh, "-lc", line}
	}
	return []string{sh, "-c", line}
}

// commandEnv is the environment c runs with: the sandbox user's, and in a
// container the image's PATH, without the host's library path (its
// directories are the host's, not the image's).
func (c Command) commandEnv() []string {
	env := c.Sandbox.env(c.Env, c.Dir)
	if c.Root == "" {
		return env
	}
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "LD_LIBRARY_PATH=") {
			out = append(out, kv)
		}
	}
	if len(c.Binds) > 0 {
		return append(out, "PATH="+containerPath+":"+gpuDir+"/bin", "LD_LIBRARY_PATH="+gpuDir+"/lib")
	}
	return append(out, "PATH="+containerPath)
}

// containerPath is a container's PATH: what Debian's and the OCI images'
// shells set.
const containerPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Rlimits are resource limits of a command; zero means unlimited.
type Rlimits struct {
	// AddressSpaceMB limits virtual memory (ulimit -v).
	AddressSpaceMB int
	// FileSizeMB limits the size of a file written (ulimit -f); a process
	// that exceeds it gets SIGXFSZ.
	FileSizeMB int
	// OpenFiles limits open file descriptors (ulimit -n).
	OpenFiles int
}

// script is the command line with the resource limits set first, in the
// same shell, so they hold for everything the line starts. A limit that
// cannot be set fails the command with status 126 before it runs.
func (r Rlimits) script(line string) string {
	var pre string
	if r.AddressSpaceMB > 0 {
		pre += fmt.Sprintf("ulimit -v %d || exit 126\n", r.AddressSpaceMB*1024)
	}
	if r.FileSizeMB > 0 {
		pre += fmt.Sprintf("ulimit -f %d || exit 126\n", r.FileSizeMB*1024) // KiB outside POSIX mode
	}
	if r.OpenFiles > 0 {
		pre += fmt.Sprintf("ulimit -n %d || exit 126\n", r.OpenFiles)
	}
	return pre + line
}

// Outcome is how a command ended.
type Outcome struct {
	// ExitCode is the exit status, or 128+signal when a signal ended it.
	ExitCode int
	// TimedOut is set when Timeout fired; Canceled when ctx ended first.
	TimedOut, Canceled bool
	// Duration from start to the exit of the command's process.
	Duration time.Duration
}

// ErrStart wraps failures to start a command at all (no bash, bad dir):
// those are the worker's problem, not the task's.
var ErrStart = errors.New("cannot start command")

// ShellArgv is the argv a command line runs as: bash -c, or with login a
// login shell (bash -lc) that reads the profile first.
func ShellArgv(line string, login bool) []string {
	if login {
		return []string{"/bin/bash", "-lc", line}
	}
	return []string{"/bin/bash", "-c", line}
}

// Run runs c and waits for it. The command gets a new process group; when
// its leader exits, whatever it left running in that group is killed too,
// and on timeout or cancellation the whole group gets SIGTERM, then SIGKILL
// after KillGrace. The group is signalled only while its leader is not yet
// reaped, so its id cannot have been reused by an unrelated process: Run
// never signals anything but what the command started.
//
// Long: starting, waiting, reaping and signalling the process group are in
// one function on purpose: the group is signalled only while its leader is
// unreaped, an order that must be read whole.
func Run(ctx context.Context, c Command) (Outcome, error) {
	grace := c.KillGrace
	if grace <= 0 {
		grace = 5 * time.Second
	}
	if c.Root != "" && c.Sandbox == nil {
		return Outcome{}, fmt.Errorf("%w: a container image needs the sandbox (namespaces), which this worker has not", ErrStart)
	}
	argv := c.shellArgv()
	cmd := &exec.Cmd{Path: argv[0], Args: argv, Dir: c.Dir, Env: c.Env, SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
	if c.Sandbox != nil {
		// The worker's own executable, started again as the namespaces'
		// first process, runs argv (see internal/nsinit).
		args, extra, err := c.Sandbox.helperArgv(c, argv, false, 3)
		if err != nil {
			return Outcome{}, fmt.Errorf("%w: sandbox: %v", ErrStart, err)
		}
		cmd = &exec.Cmd{Path: c.Sandbox.helper, Args: args, Dir: c.Dir, Env: append(c.commandEnv(), nsinit.Env+"=1"),
			ExtraFiles: extra, SysProcAttr: c.Sandbox.sysProcAttr(c.NoNetwork)}
	}
	if c.CgroupFD > 0 {
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, c.CgroupFD
	}
	out, err := newOutputs()
	if err != nil {
		return Outcome{}, err
	}
	cmd.Stdout, cmd.Stderr = out.outW, out.errW
	start := time.Now()
	err = startBound(cmd, c.CPUs)
	out.started(c)
	if err != nil {
		out.close()
		return Outcome{}, fmt.Errorf("%w: %v", ErrStart, err)
	}
	pgid := cmd.Process.Pid

	exited := make(chan struct{})
	go func() {
		defer close(exited)
		var info unix.Siginfo
		for {
			// WNOWAIT: learn of the exit but leave the leader a zombie, so
			// that its pid (the group id) stays reserved until we reap it.
			err := unix.Waitid(unix.P_PID, pgid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if err != unix.EINTR {
				return
			}
		}
	}()

	timer, stopTimer := c.timer()
	defer stopTimer()
	var o Outcome
	select {
	case <-exited:
	case <-timer:
		o.TimedOut = true
	case <-ctx.Done():
		o.Canceled = true
	}
	if o.TimedOut || o.Canceled {
		_ = unix.Kill(-pgid, unix.SIGTERM)
		select {
		case <-exited:
		case <-time.After(grace):
		}
	}
	// The leader has exited (or is past its grace): nothing of the group
	// may outlive the command.
	_ = unix.Kill(-pgid, unix.SIGKILL)
	<-exited
	o.Duration = time.Since(start)
	werr := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		switch {
		case ws.Exited():
			o.ExitCode = ws.ExitStatus()
		case ws.Signaled():
			o.ExitCode = 128 + int(ws.Signal())
		}
	} else if werr != nil {
		o.ExitCode = -1
	}
	// A process that left the group (setsid) may hold the pipe open.
	out.wait()
	return o, nil
}

// outputs are the pipes of a command's stdout and stderr, copied to its
// writers as it runs.
type outputs struct {
	outR, outW, errR, errW *os.File
	copied                 chan struct{}
}

func newOutputs() (*outputs, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%w: pipe: %v", ErrStart, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("%w: pipe: %v", ErrStart, err)
	}
	return &outputs{outR: outR, outW: outW, errR: errR, errW: errW, copied: make(chan struct{})}, nil
}

// started closes the write ends (the command has its own) and copies
// what comes to c's writers until the command and all it started have
// closed theirs.
func (o *outputs) started(c Command) {
	o.outW.Close()
	o.errW.Close()
	var copying sync.WaitGroup
	for _, p := range []struct {
		r *os.File
		w io.Writer
	}{{o.outR, c.Stdout}, {o.errR, c.Stderr}} {
		w := p.w
		if w == nil {
			w = io.Discard
		}
		copying.Add(1)
		go func() {
			defer copying.Done()
			_, _ = io.Copy(w, p.r)
		}()
	}
	go func() {
		copying.Wait()
		close(o.copied)
	}()
}

// wait waits for the copies to end, at most 2 s once the command has: a
// process that escaped it may hold a pipe open.
func (o *outputs) wait() {
	select {
	case <-o.copied:
	case <-time.After(2 * time.Second):
		o.close()
		<-o.copied
	}
	o.close()
}

// close closes the read ends (a copy in progress ends).
func (o *outputs) close() {
	o.outR.Close()
	o.errR.Close()
}

// timer fires at c's timeout (never without one); stop releases it.
func (c Command) timer() (<-chan time.Time, func()) {
	if c.Timeout <= 0 {
		return nil, func() {}
	}
	t := time.NewTimer(c.Timeout)
	return t.C, func() { t.Stop() }
}

// startBound starts cmd bound to cpus: the calling thread takes their
// affinity for the fork, which the child inherits, then gets its own back.
// (Go cannot run code in the child between fork and exec.)
func startBound(cmd *exec.Cmd, cpus []int) error {
	if len(cpus) == 0 {
		return cmd.Start()
	}
	runtime.LockOSThread()
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("cpu affinity: %w", err)
	}
	for _, c := range cpus {
		set.Set(c)
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("bind to CPUs %v: %w", cpus, err)
	}
	err := cmd.Start()
	if rerr := unix.SchedSetaffinity(0, &old); rerr != nil {
		// The thread keeps the narrow mask: it stays locked, and is
		// discarded when this goroutine ends, rather than run others.
		return err
	}
	runtime.UnlockOSThread()
	return err
}
