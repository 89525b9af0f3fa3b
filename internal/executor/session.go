package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hpcq/hpcq/internal/nsinit"
)

// session is the sandbox of one task attempt: the helper started once, its
// namespaces, mounts, bounded /tmp, cgroups and user set up once, running
// every command of the attempt the worker sends it (nsinit's serve mode).
// A command that wants no network gets a network namespace the helper
// makes on its first such command. When a command's first process ends,
// whatever it started is killed, as with a sandbox per command; what it
// left in /tmp or the workspace stays for the next command of the attempt.
type session struct {
	helper  *exec.Cmd
	conn    *net.UnixConn
	replies chan nsinit.Reply // closed when the helper is gone
	exited  chan struct{}     // closed once the helper is reaped
	diag    *cappedBuffer     // the helper's own stderr (a failed setup)
	grace   time.Duration
	mu      sync.Mutex // one command at a time
	dead    error      // set once the helper is gone
}

// openSession starts the helper for the commands of a task attempt like c
// (its directory, cgroups, CPUs, user, /tmp bound and network).
func (s *Sandbox) openSession(c Command) (*session, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: sandbox socket: %v", ErrStart, err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "sandbox"), os.NewFile(uintptr(fds[1]), "sandbox-helper")
	defer theirs.Close()
	fc, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return nil, fmt.Errorf("%w: sandbox socket: %v", ErrStart, err)
	}
	conn := fc.(*net.UnixConn)
	args, extra, err := s.helperArgv(c, nil, true, nsinit.ServeFD+1)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("%w: sandbox: %v", ErrStart, err)
	}
	ss := &session{conn: conn, replies: make(chan nsinit.Reply, 1), exited: make(chan struct{}), diag: &cappedBuffer{max: 64 << 10},
		grace: c.KillGrace}
	if ss.grace <= 0 {
		ss.grace = 5 * time.Second
	}
	ss.helper = &exec.Cmd{Path: s.helper, Args: args, Dir: c.Dir, Env: append(s.env(c.Env, c.Dir), nsinit.Env+"=1"),
		Stdout: ss.diag, Stderr: ss.diag, ExtraFiles: append([]*os.File{theirs}, extra...), SysProcAttr: s.sysProcAttr(false)}
	if c.CgroupFD > 0 {
		ss.helper.SysProcAttr.UseCgroupFD, ss.helper.SysProcAttr.CgroupFD = true, c.CgroupFD
	}
	if err := startBound(ss.helper, c.CPUs); err != nil {
		conn.Close()
		return nil, fmt.Errorf("%w: %v", ErrStart, err)
	}
	go func() {
		_ = ss.helper.Wait()
		close(ss.exited)
	}()
	go ss.readReplies()
	return ss, nil
}

func (ss *session) readReplies() {
	defer close(ss.replies)
	buf := make([]byte, 64<<10)
	for {
		n, _, _, _, err := ss.conn.ReadMsgUnix(buf, nil)
		if err != nil || n == 0 {
			return
		}
		var r nsinit.Reply
		if json.Unmarshal(buf[:n], &r) != nil {
			return
		}
		ss.replies <- r
	}
}

// send writes a request with the descriptors fds.
func (ss *session) send(req nsinit.Request, fds ...int) error {
	data, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if len(data) > nsinit.MaxMessage {
		return fmt.Errorf("the command and its environment take %d bytes, at most %d", len(data), nsinit.MaxMessage)
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	_, _, err = ss.conn.WriteMsgUnix(data, oob, nil)
	return err
}

// run runs c in the session, as Run runs it in a sandbox of its own.
func (ss *session) run(ctx context.Context, c Command) (Outcome, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.dead != nil {
		return ss.failed(c)
	}
	out, err := newOutputs()
	if err != nil {
		return Outcome{}, err
	}
	argv := c.shellArgv()
	start := time.Now()
	err = ss.send(nsinit.Request{Argv: argv, Env: c.commandEnv(), NoNetwork: c.NoNetwork}, int(out.outW.Fd()), int(out.errW.Fd()))
	out.started(c)
	if err != nil {
		out.close()
		ss.gone(err)
		return ss.failed(c)
	}
	defer out.wait()
	r, ok := <-ss.replies
	switch {
	case !ok:
		ss.gone(errors.New("the sandbox helper ended"))
		return ss.failed(c)
	case r.Err != "":
		return Outcome{}, fmt.Errorf("%w: sandbox: %s", ErrStart, r.Err)
	}

	timer, stopTimer := c.timer()
	defer stopTimer()
	var o Outcome
	select {
	case r, ok = <-ss.replies:
	case <-timer:
		o.TimedOut = true
	case <-ctx.Done():
		o.Canceled = true
	}
	if o.TimedOut || o.Canceled {
		// SIGTERM to every process of the command, SIGKILL after the
		// grace; the helper's own end is the last resort.
		r, ok = ss.stop(unix.SIGTERM, ss.grace)
		if !ok {
			r, ok = ss.stop(unix.SIGKILL, ss.grace)
		}
		if !ok {
			ss.kill()
		}
	}
	o.Duration = time.Since(start)
	if !ok || !r.Exited {
		ss.gone(errors.New("the sandbox helper ended"))
		if o.TimedOut || o.Canceled {
			o.ExitCode = 128 + int(unix.SIGKILL)
			return o, nil
		}
		return ss.failed(c)
	}
	o.ExitCode = r.Exit
	return o, nil
}

// stop sends sig to the command's processes and waits up to d for its end.
func (ss *session) stop(sig unix.Signal, d time.Duration) (nsinit.Reply, bool) {
	if ss.send(nsinit.Request{Signal: int(sig)}) != nil {
		return nsinit.Reply{}, false
	}
	select {
	case r, ok := <-ss.replies:
		return r, ok
	case <-time.After(d):
		return nsinit.Reply{}, false
	}
}

// gone marks the session dead: later commands fail at once.
func (ss *session) gone(why error) {
	if ss.dead == nil {
		ss.dead = why
	}
}

// failed is the outcome of a command the helper could not run: its exit
// status (125 when it could not set the sandbox up), with what it said
// on the command's stderr.
func (ss *session) failed(c Command) (Outcome, error) {
	select {
	case <-ss.exited:
	case <-time.After(ss.grace):
		ss.kill()
	}
	code := 125
	if ps := ss.helper.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal()) // killed, by the OOM killer say
		} else if ps.ExitCode() > 0 {
			code = ps.ExitCode()
		}
	}
	if c.Stderr != nil {
		msg := ss.diag.String()
		if msg == "" {
			msg = fmt.Sprintf("hpcq-sandbox: the task's sandbox ended (%v)\n", ss.dead)
		}
		_, _ = c.Stderr.Write([]byte(msg))
	}
	return Outcome{ExitCode: code}, nil
}

// kill ends the helper (and with it the namespaces) and waits for it.
func (ss *session) kill() {
	_ = unix.Kill(-ss.helper.Process.Pid, unix.SIGKILL)
	<-ss.exited
}

// close ends the session: the helper sees the socket close and exits, and
// the kernel kills what is left in its namespaces.
func (ss *session) close() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.conn.Close()
	select {
	case <-ss.exited:
	case <-time.After(ss.grace):
		ss.kill()
	}
}

// cappedBuffer keeps the first max bytes written to it.
type cappedBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if left := b.max - len(b.buf); left > 0 {
		b.buf = append(b.buf, p[:min(len(p), left)]...)
	}
	return len(p), nil
}

func (b *cappedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// attemptSandbox is the session of a task attempt, opened by its first
// command.
type attemptSandbox struct {
	mu sync.Mutex
	ss *session
}

// run runs c in the attempt's session (opened on first use), or with no
// sandbox as Run does.
func (a *attemptSandbox) run(ctx context.Context, c Command) (Outcome, error) {
	if c.Sandbox == nil || a == nil {
		return Run(ctx, c)
	}
	a.mu.Lock()
	if a.ss == nil {
		ss, err := c.Sandbox.openSession(c)
		if err != nil {
			a.mu.Unlock()
			return Outcome{}, err
		}
		a.ss = ss
	}
	ss := a.ss
	a.mu.Unlock()
	return ss.run(ctx, c)
}

// close ends the attempt's session, if one was opened.
func (a *attemptSandbox) close() {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ss != nil {
		a.ss.close()
		a.ss = nil
	}
}
