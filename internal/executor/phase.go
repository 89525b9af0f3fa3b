// A phase's commands run one after another, their output captured and
// logged, the phase's outcome and error kind.

package executor

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hpcq/hpcq/internal/textcut"
	"github.com/hpcq/hpcq/pkg/schema"
)

type phaseSpec struct {
	name    string
	cmds    []string
	timeout time.Duration
	kind    string
}

// phaseRun is what every command of a task shares.
type phaseRun struct {
	ws        string
	env       []string
	maxOut    int64
	rlimits   Rlimits
	noNetwork bool // for the compile and run phases
	tmpMB     int  // the bound of each command's /tmp, /var/tmp and /dev/shm
	login     bool // bash -lc per command
	// live receives each phase's log as it is written (LiveLog), by phase.
	live map[string]io.Writer
	// cpus bind the commands; cgroup (v2) and v1 limit their memory and
	// processes (nil: none made).
	cpus   []int
	cgroup *taskCgroup
	v1     *taskV1
	// pids is the process limit, pidsBy how it is enforced (a
	// schema.Enforced PidsBy).
	pids   int
	pidsBy string
	// user runs the commands: the slot's own uid (nil: the sandbox's).
	user *TaskUser
	// ctr is the container the commands run in (nil: the host).
	ctr *containerRun
	// box is the attempt's sandbox, opened by its first command (nil: no
	// sandbox).
	box *attemptSandbox
	// visible are directories the commands see read-only where the
	// sandbox hides the rest (the node's workspace, to its evaluator).
	visible []string
	diskMB  int // the workspace's bound on disk (0: none)
	// memoryMB is the task's memory limit, memory how it is enforced.
	memoryMB int
	memory   string
}

// lockedWriter serializes writes from the two output streams.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// runPhase runs the commands of one phase in order. Each stream is kept in
// its own bounded capture; both go to the phase's log file; stdout lines go
// to stdoutLine and, with diags, both streams' lines to the diagnostics
// parser. It returns the phase's record, the task error if the phase failed,
// or an error if the worker failed (or ctx ended: then ctx's error).
//
// Long: each command's plumbing (captures, log file, line readers,
// diagnostics) is set up and torn down in one place, so that a reader sees
// every pipe drained before the phase's record is made.
func (e *Executor) runPhase(ctx context.Context, ph phaseSpec, run phaseRun, f *os.File, diags *diagnostics, stdoutLine func(string)) (schema.PhaseResult, *schema.ResultError, error) {
	pr := schema.PhaseResult{Name: ph.name, Started: time.Now().UTC(), LogRef: f.Name()}
	limit := int(min(run.maxOut, 1<<30))
	stdoutCap, stderrCap := NewCapture(limit), NewCapture(limit)
	both := NewCapture(2 * e.cfg.LogTailBytes) // the interleaved tail for the result
	var file io.Writer = f
	if lw := run.live[ph.name]; lw != nil {
		file = io.MultiWriter(f, lw)
	}
	log := &lockedWriter{w: io.MultiWriter(both, &cappedWriter{w: file, left: e.cfg.MaxLogBytes})}
	outs := []io.Writer{stdoutCap, log}
	errs := []io.Writer{stderrCap, log}
	var closers []*lineWriter
	if stdoutLine != nil {
		lw := &lineWriter{fn: stdoutLine}
		outs, closers = append(outs, lw), append(closers, lw)
	}
	if diags != nil {
		lo, le := &lineWriter{fn: diags.line}, &lineWriter{fn: diags.line}
		outs, errs, closers = append(outs, lo), append(errs, le), append(closers, lo, le)
	}
	stdout, stderr := io.MultiWriter(outs...), io.MultiWriter(errs...)
	deadline := time.Now().Add(ph.timeout)
	var rerr *schema.ResultError
	// The workspace's disk bound, measured while the phase runs: past it
	// the phase is stopped.
	pctx := ctx
	var disk *diskWatch
	diskLimit := int64(run.diskMB) << 20
	if diskLimit > 0 {
		var cancel context.CancelFunc
		pctx, cancel = context.WithCancel(ctx)
		defer cancel()
		disk = watchDisk(run.ws, diskLimit, cancel)
		defer disk.halt()
	}
	diskErr := func(what string) *schema.ResultError {
		return &schema.ResultError{Phase: ph.name, Kind: ph.kind,
			Message: fmt.Sprintf("%s stopped: the workspace held more than limits.disk_mb (%d MB) on disk", what, run.diskMB)}
	}
	for i, line := range ph.cmds {
		fmt.Fprintf(log, "$ %s\n", line)
		left := time.Until(deadline)
		if left <= 0 {
			left = time.Millisecond
		}
		cmd := Command{Line: line, Dir: run.ws, Env: run.env, Timeout: left, KillGrace: e.cfg.KillGrace,
			Stdout: stdout, Stderr: stderr, Rlimits: run.rlimits, Sandbox: e.sandbox, Login: run.login,
			NoNetwork: run.noNetwork && ph.name != schema.PhaseDownload, CPUs: run.cpus, TmpMB: run.tmpMB, User: run.user}
		switch c := run.ctr; {
		case c != nil && c.site != nil:
			cmd.Line, cmd.Visible = c.site.wrap(line, c.siteImage, run.ws, c.gpus), []string{c.siteImage}
		case c != nil:
			cmd.Root, cmd.Layers, cmd.Scaffold, cmd.Upper, cmd.Binds = c.root, c.layers, c.scaffold, c.upper, c.binds
		}
		cmd.Visible = append(cmd.Visible, run.visible...)
		if run.cgroup != nil {
			cmd.CgroupFD = run.cgroup.fd
		}
		if run.v1 != nil {
			cmd.JoinCgroups = run.v1.procs()
		}
		o, err := run.box.run(pctx, cmd)
		for _, c := range closers {
			c.Close()
		}
		if err != nil {
			return pr, nil, err
		}
		pr.ExitCode = o.ExitCode
		what := fmt.Sprintf("%s command %d (%s)", ph.name, i+1, textcut.OneLine(line, 120))
		if o.Canceled && ctx.Err() == nil && disk != nil {
			if used := disk.end(run.ws, diskLimit); used > 0 {
				rerr = diskErr(what)
				break
			}
		}
		if o.Canceled {
			return pr, nil, ctx.Err()
		}
		switch {
		case o.TimedOut:
			rerr = &schema.ResultError{Phase: ph.name, Kind: schema.ErrKindTimeout,
				Message: fmt.Sprintf("%s killed after the phase timeout of %v", what, ph.timeout)}
		case o.ExitCode == 127 && ph.name != schema.PhaseRun:
			rerr = &schema.ResultError{Phase: ph.name, Kind: schema.ErrKindToolchainMissing,
				Message: fmt.Sprintf("%s: command not found (exit status 127): %s", what, lastLine(stderrCap.Tail(512)))}
		case o.ExitCode == 128+int(syscall.SIGXFSZ):
			rerr = &schema.ResultError{Phase: ph.name, Kind: ph.kind,
				Message: fmt.Sprintf("%s killed by SIGXFSZ: a file exceeded limits.file_size_mb (%d MB)", what, run.rlimits.FileSizeMB)}
		case o.ExitCode > 128 && o.ExitCode < 128+65:
			rerr = &schema.ResultError{Phase: ph.name, Kind: ph.kind,
				Message: fmt.Sprintf("%s killed by signal %s", what, unix.SignalName(syscall.Signal(o.ExitCode-128)))}
		case o.ExitCode != 0:
			rerr = &schema.ResultError{Phase: ph.name, Kind: ph.kind,
				Message: fmt.Sprintf("%s exited with status %d", what, o.ExitCode)}
		}
		if rerr != nil {
			break
		}
	}
	if disk != nil && rerr == nil {
		if used := disk.end(run.ws, diskLimit); used > 0 {
			rerr = diskErr(ph.name + " phase")
		}
	}
	if d := stdoutCap.Dropped() + stderrCap.Dropped(); d > 0 {
		fmt.Fprintf(log, "[hpcq: %d bytes of output not kept in memory (max_output_bytes %d per stream)]\n", d, run.maxOut)
	}
	pr.OK = rerr == nil
	pr.DurationMS = time.Since(pr.Started).Milliseconds()
	pr.LogTail = both.Tail(e.cfg.LogTailBytes)
	if rerr != nil {
		rerr.Message += pidsReason(run, pr)
		if rerr.Kind != schema.ErrKindTimeout {
			rerr.Message += memoryReason(run, pr)
		}
	}
	return pr, rerr, nil
}

// iterativeDownload runs the download phase of a task with Install set:
// its planned commands first, then the installer's, one at a time, all
// within the phase's timeout, into the phase's log.
func (e *Executor) iterativeDownload(ctx context.Context, t *schema.NodeTask, ph phaseSpec, run phaseRun, f *os.File) (schema.PhaseResult, *schema.ResultError, error) {
	pr := schema.PhaseResult{Name: ph.name, Started: time.Now().UTC(), LogRef: f.Name()}
	fail := func(msg string) (schema.PhaseResult, *schema.ResultError, error) {
		fmt.Fprintf(f, "[hpcq: %s]\n", msg)
		pr.DurationMS = time.Since(pr.Started).Milliseconds()
		pr.LogTail = strings.TrimSpace(pr.LogTail + "\n" + msg)
		return pr, &schema.ResultError{Phase: ph.name, Kind: ph.kind, Message: msg}, nil
	}
	if e.cfg.Installer == nil {
		pr.ExitCode = -1
		return fail("the task asks for an iterative install and this worker has no installer: it asks the model through the LLM gateway " +
			"of a `scheduler run` on its NATS server")
	}
	deadline := time.Now().Add(ph.timeout)
	if len(ph.cmds) > 0 {
		p, rerr, err := e.runPhase(ctx, ph, run, f, nil, nil)
		if err != nil {
			return pr, nil, err
		}
		pr.ExitCode, pr.LogTail = p.ExitCode, p.LogTail
		if rerr != nil {
			pr.DurationMS = time.Since(pr.Started).Milliseconds()
			return pr, rerr, nil
		}
	}
	var workerErr error
	steps := 0
	ierr := e.cfg.Installer(ctx, t, func(ctx context.Context, command string) (int, string, error) {
		left := time.Until(deadline)
		if left <= 0 {
			return 0, "", fmt.Errorf("the download phase's timeout of %v is spent", ph.timeout)
		}
		steps++
		p, _, err := e.runPhase(ctx, phaseSpec{name: ph.name, cmds: []string{command}, timeout: left, kind: ph.kind}, run, f, nil, nil)
		if err != nil {
			workerErr = err
			return 0, "", err
		}
		pr.ExitCode, pr.LogTail = p.ExitCode, p.LogTail
		return p.ExitCode, p.LogTail, nil
	})
	if workerErr != nil {
		return pr, nil, workerErr
	}
	if ierr != nil {
		if ctx.Err() != nil {
			return pr, nil, ctx.Err()
		}
		return fail(fmt.Sprintf("iterative install failed after %d commands: %v", steps, ierr))
	}
	fmt.Fprintf(f, "[hpcq: iterative install done after %d commands]\n", steps)
	pr.OK, pr.ExitCode = true, 0
	pr.DurationMS = time.Since(pr.Started).Milliseconds()
	return pr, nil, nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// phaseSpecs are the task's phases after coding, with their time limits,
// and the names of those that run (a log file each).
func (e *Executor) phaseSpecs(t *schema.NodeTask) ([]phaseSpec, []string) {
	phases := []phaseSpec{
		{schema.PhaseDownload, t.Artifacts.Download.Commands, seconds(t.Limits.DownloadTimeoutS, e.cfg.DownloadTimeout), schema.ErrKindInstallFailed},
		{schema.PhaseCompile, t.Artifacts.Compile.Commands, seconds(t.Limits.CompileTimeoutS, e.cfg.CompileTimeout), schema.ErrKindCompileFailed},
		{schema.PhaseRun, t.Artifacts.Run.Commands, seconds(t.Limits.RunTimeoutS, e.cfg.RunTimeout), schema.ErrKindRunFailed},
	}
	var names []string
	for _, ph := range phases {
		if len(ph.cmds) > 0 || (ph.name == schema.PhaseDownload && t.Install != nil) {
			names = append(names, ph.name)
		}
	}
	return phases, names
}

// seconds is s seconds, or def when s is not above 0.
func seconds(s int, def time.Duration) time.Duration {
	if s > 0 {
		return time.Duration(s) * time.Second
	}
	return def
}
