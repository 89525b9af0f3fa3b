package nsinit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// ServeFD is the helper's end of the socket (SOCK_SEQPACKET) a worker
// talks to it over when Spec.Serve is set.
const ServeFD = 3

// Request starts a command in a serving helper's namespaces; the message
// carries its stdout and stderr as SCM_RIGHTS (stdin is /dev/null). Only
// one command runs at a time. A Request with Signal set instead sends that
// signal to every process of the namespace but the helper.
type Request struct {
	Argv []string `json:"argv,omitempty"`
	Env  []string `json:"env,omitempty"`
	// NoNetwork starts the command in a network namespace of its own with
	// only loopback (made once, on the first such request).
	NoNetwork bool `json:"no_network,omitempty"`
	Signal    int  `json:"signal,omitempty"`
}

// Reply is the helper's answer: Started once the command runs (or Err),
// then Exit when it has ended and nothing it started is left.
type Reply struct {
	Started bool   `json:"started,omitempty"`
	Err     string `json:"err,omitempty"`
	Exited  bool   `json:"exited,omitempty"`
	// Exit is the exit status, 128+signal when a signal ended it.
	Exit int `json:"exit"`
}

// MaxMessage bounds a request (argv and environment) or reply.
const MaxMessage = 4 << 20

// serve runs the commands the worker sends over ServeFD, one at a time,
// in the namespaces set up once: every command of a task attempt shares
// its mounts, its bounded /tmp, its cgroups and its user. When a command's
// first process ends, whatever else it started is killed before the reply,
// as when each command had namespaces of its own. It returns when the
// worker closes the socket; the kernel then kills what is left.
func serve(spec Spec, env []string) int {
	// The socket is the helper's alone: a command holding it could read
	// the worker's requests or answer in the helper's name.
	unix.CloseOnExec(ServeFD)
	reqs := make(chan received)
	go readRequests(reqs)
	var offline *netThread
	for {
		r, ok := <-reqs
		if !ok {
			return 0
		}
		if r.req.Signal != 0 {
			continue // nothing runs
		}
		start := os.StartProcess
		if r.req.NoNetwork && !spec.NoNetwork {
			if offline == nil {
				t, err := newNetThread()
				if err != nil {
					closeAll(r.fds)
					reply(Reply{Err: "no network namespace: " + err.Error()})
					continue
				}
				offline = t
			}
			start = offline.start
		}
		code, err := runServed(spec, env, r, reqs, start)
		if err != nil {
			fmt.Fprintf(os.Stderr, "hpcq-sandbox: %v\n", err)
			return 125
		}
		if code < 0 {
			return 0 // the worker went away mid-command
		}
	}
}

type received struct {
	req Request
	fds []int
}

// readRequests reads requests until the socket ends.
func readRequests(out chan<- received) {
	defer close(out)
	buf := make([]byte, MaxMessage)
	oob := make([]byte, unix.CmsgSpace(2*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(ServeFD, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			return
		}
		var r received
		if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, m := range msgs {
				if fds, err := unix.ParseUnixRights(&m); err == nil {
					r.fds = append(r.fds, fds...)
				}
			}
		}
		if err := json.Unmarshal(buf[:n], &r.req); err != nil {
			closeAll(r.fds)
			reply(Reply{Err: "bad request: " + err.Error()})
			continue
		}
		out <- r
	}
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

func reply(r Reply) {
	data, _ := json.Marshal(r)
	_ = unix.Sendmsg(ServeFD, data, nil, nil, 0)
}

// runServed starts r's command and waits for it, passing on the signals
// the worker sends meanwhile; -1 when the worker went away.
func runServed(spec Spec, env []string, r received, reqs <-chan received,
	start func(string, []string, *os.ProcAttr) (*os.Process, error)) (int, error) {
	if len(r.req.Argv) == 0 || len(r.fds) != 2 {
		closeAll(r.fds)
		reply(Reply{Err: fmt.Sprintf("a command needs argv and 2 descriptors (got %d, %d)", len(r.req.Argv), len(r.fds))})
		return 0, nil
	}
	stdout, stderr := os.NewFile(uintptr(r.fds[0]), "stdout"), os.NewFile(uintptr(r.fds[1]), "stderr")
	defer stdout.Close()
	defer stderr.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		return 0, err
	}
	defer null.Close()
	cmdEnv := r.req.Env
	if cmdEnv == nil {
		cmdEnv = env
	}
	p, err := start(r.req.Argv[0], r.req.Argv, &os.ProcAttr{Env: cmdEnv, Files: []*os.File{null, stdout, stderr}, Sys: commandAttr(spec)})
	if err != nil {
		reply(Reply{Err: fmt.Sprintf("start %s: %v", r.req.Argv[0], err)})
		return 0, nil
	}
	reply(Reply{Started: true})
	exited := make(chan int, 1)
	go func() { exited <- reapUntil(p.Pid) }()
	code := 0
	for waiting := true; waiting; {
		select {
		case code = <-exited:
			waiting = false
		case s, ok := <-reqs:
			if !ok {
				return -1, nil
			}
			closeAll(s.fds)
			if s.req.Signal > 0 {
				_ = unix.Kill(-1, syscall.Signal(s.req.Signal))
			}
		}
	}
	// What the command left (in its group or not) ends with it.
	_ = unix.Kill(-1, unix.SIGKILL)
	for {
		_, err := unix.Wait4(-1, nil, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			break // ECHILD: nothing left
		}
	}
	if spec.HideFS || spec.Root != "" {
		reportTmpFull(stderr, spec.TmpMB)
	}
	reply(Reply{Exited: true, Exit: code})
	return code, nil
}

// reapUntil reaps the namespace's processes until pid ends; its status.
func reapUntil(pid int) int {
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 125
		}
		if got != pid {
			continue // an orphan, reaped
		}
		switch {
		case ws.Exited():
			return ws.ExitStatus()
		case ws.Signaled():
			return 128 + int(ws.Signal())
		}
	}
}

// netThread is an OS thread of the helper moved to a network namespace of
// its own (loopback up): a process started from it is born there. Network
// namespaces are per thread; the thread stays locked to its goroutine and
// is never used for anything else.
type netThread struct {
	reqs chan netStart
}

type netStart struct {
	name string
	argv []string
	attr *os.ProcAttr
	done chan netStarted
}

type netStarted struct {
	p   *os.Process
	err error
}

func newNetThread() (*netThread, error) {
	t := &netThread{reqs: make(chan netStart)}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the helper
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ready <- err
			return
		}
		if err := loopbackUp(); err != nil {
			ready <- fmt.Errorf("loopback: %w", err)
			return
		}
		ready <- nil
		for r := range t.reqs {
			p, err := os.StartProcess(r.name, r.argv, r.attr)
			r.done <- netStarted{p, err}
		}
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	return t, nil
}

func (t *netThread) start(name string, argv []string, attr *os.ProcAttr) (*os.Process, error) {
	done := make(chan netStarted, 1)
	t.reqs <- netStart{name: name, argv: argv, attr: attr, done: done}
	r := <-done
	return r.p, r.err
}
