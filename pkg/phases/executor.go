package phases

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/worker"
)

// Config configures the Executor. Every field has a default.
type Config struct {
	// RunsDir holds one directory per run: <RunsDir>/<run_id>/workspaces and
	// phase_logs. Defaults to "runs".
	RunsDir string
	// Default timeouts of the phases, used when a task's limits leave them
	// at 0. Default 30m, 30m and 1h.
	DownloadTimeout, CompileTimeout, RunTimeout time.Duration
	// KillGrace is the time between SIGTERM and SIGKILL. Defaults to 5s.
	KillGrace time.Duration
	// MaxOutputBytes of a phase's output kept in memory, when the task does
	// not set it. Defaults to 8 MiB.
	MaxOutputBytes int64
	// MaxLogBytes written to a phase's log file. Defaults to 64 MiB.
	MaxLogBytes int64
	// LogTailBytes of a phase's output put in the result. Defaults to 4 KiB.
	LogTailBytes int
	// Workspace limits.
	Workspace WorkspaceLimits
}

func (c Config) withDefaults() Config {
	if c.RunsDir == "" {
		c.RunsDir = "runs"
	}
	if c.DownloadTimeout <= 0 {
		c.DownloadTimeout = 30 * time.Minute
	}
	if c.CompileTimeout <= 0 {
		c.CompileTimeout = 30 * time.Minute
	}
	if c.RunTimeout <= 0 {
		c.RunTimeout = time.Hour
	}
	if c.KillGrace <= 0 {
		c.KillGrace = 5 * time.Second
	}
	if c.MaxOutputBytes <= 0 {
		c.MaxOutputBytes = 8 << 20
	}
	if c.MaxLogBytes <= 0 {
		c.MaxLogBytes = 64 << 20
	}
	if c.LogTailBytes <= 0 {
		c.LogTailBytes = 4 << 10
	}
	return c
}

// Executor runs a task's phases as shell commands in a fresh workspace.
type Executor struct {
	cfg     Config
	baseEnv []string
}

var _ worker.Executor = (*Executor)(nil)

// NewExecutor returns an Executor. The environment of commands is the
// worker's, without the worker's own settings and secrets (HPCQ_*,
// OPENAI_*, NATS_*), plus the task's variables.
func NewExecutor(cfg Config) (*Executor, error) {
	cfg = cfg.withDefaults()
	abs, err := filepath.Abs(cfg.RunsDir)
	if err != nil {
		return nil, fmt.Errorf("phases: runs dir: %w", err)
	}
	cfg.RunsDir = abs
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "HPCQ_") || strings.HasPrefix(kv, "OPENAI_") || strings.HasPrefix(kv, "NATS_") {
			continue
		}
		env = append(env, kv)
	}
	return &Executor{cfg: cfg, baseEnv: env}, nil
}

// WorkspaceDir is where a task's files are written and its commands run.
func (e *Executor) WorkspaceDir(t *queue.NodeTask) string {
	return filepath.Join(e.cfg.RunsDir, t.RunID, "workspaces", t.NodeID, strconv.Itoa(t.Attempt))
}

// LogDir is where a task's phase logs go.
func (e *Executor) LogDir(t *queue.NodeTask) string {
	return filepath.Join(e.cfg.RunsDir, t.RunID, "phase_logs", "node_"+t.NodeID)
}

func seconds(s int, def time.Duration) time.Duration {
	if s > 0 {
		return time.Duration(s) * time.Second
	}
	return def
}

// Execute writes the workspace, then runs the download, compile and run
// commands, stopping at the first failure.
func (e *Executor) Execute(ctx context.Context, t *queue.NodeTask, slot worker.Slot) (*queue.NodeResult, error) {
	res := &queue.NodeResult{Started: time.Now().UTC()}
	defer func() { res.DurationMS = time.Since(res.Started).Milliseconds() }()

	ws := e.WorkspaceDir(t)
	phases := []struct {
		name    string
		cmds    []string
		timeout time.Duration
		kind    string
	}{
		{queue.PhaseDownload, t.Artifacts.Download.Commands, seconds(t.Limits.DownloadTimeoutS, e.cfg.DownloadTimeout), queue.ErrKindInstallFailed},
		{queue.PhaseCompile, t.Artifacts.Compile.Commands, seconds(t.Limits.CompileTimeoutS, e.cfg.CompileTimeout), queue.ErrKindCompileFailed},
		{queue.PhaseRun, t.Artifacts.Run.Commands, seconds(t.Limits.RunTimeoutS, e.cfg.RunTimeout), queue.ErrKindRunFailed},
	}
	var names []string
	for _, ph := range phases {
		if len(ph.cmds) > 0 {
			names = append(names, ph.name)
		}
	}
	// The log files are made while the workspace is: on disks where a
	// mkdir costs a fraction of a millisecond, this takes them off the
	// task's critical path.
	logsReady := make(chan phaseLogs, 1)
	go func() { logsReady <- openLogs(e.LogDir(t), names) }()
	logs := sync.OnceValue(func() phaseLogs { return <-logsReady })
	defer func() { logs().close() }()

	// A fresh directory per (node, attempt): nothing of an earlier delivery
	// of the same attempt survives.
	if err := freshDir(ws); err != nil {
		return nil, fmt.Errorf("create workspace: %w", err)
	}

	start := time.Now()
	files := t.Artifacts.Coding.Workspace.Files
	werr := WriteFiles(ws, files, e.cfg.Workspace)
	coding := queue.PhaseResult{Name: queue.PhaseCoding, OK: werr == nil, Started: start.UTC(), DurationMS: time.Since(start).Milliseconds()}
	if werr != nil {
		coding.ExitCode = -1
		coding.LogTail = werr.Error()
		res.Phases = append(res.Phases, coding)
		if errors.Is(werr, ErrInvalidWorkspace) {
			res.Error = &queue.ResultError{Phase: queue.PhaseCoding, Kind: queue.ErrKindInvalidWorkspace, Message: werr.Error()}
			return res, nil
		}
		return nil, werr
	}
	res.Phases = append(res.Phases, coding)

	env := append(append([]string(nil), e.baseEnv...),
		"HPCQ_RUN_ID="+t.RunID, "HPCQ_NODE_ID="+t.NodeID, "HPCQ_ATTEMPT="+strconv.Itoa(t.Attempt),
		"HPCQ_WORKSPACE="+ws, "OMP_NUM_THREADS="+strconv.Itoa(max(1, slot.Cores)))
	for k, v := range t.Env {
		env = append(env, k+"="+v)
	}
	maxOut := e.cfg.MaxOutputBytes
	if t.Limits.MaxOutputBytes > 0 {
		maxOut = t.Limits.MaxOutputBytes
	}
	if err := logs().err; err != nil {
		return nil, err
	}
	for _, ph := range phases {
		if len(ph.cmds) == 0 {
			continue
		}
		pr, rerr, err := e.runPhase(ctx, ph.name, ph.cmds, ph.timeout, ws, logs().files[ph.name], env, maxOut)
		if err != nil {
			return nil, err
		}
		res.Phases = append(res.Phases, pr)
		if rerr != nil {
			if rerr.Kind == "" {
				rerr.Kind = ph.kind
			}
			res.Error = rerr
			return res, nil
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(t.Artifacts.Run.ExpectedOutputs) == 0 {
		return res, nil
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	defer root.Close()
	var missing []string
	for _, p := range t.Artifacts.Run.ExpectedOutputs {
		if CheckPath(p) != nil {
			missing = append(missing, p)
			continue
		}
		if _, err := root.Stat(p); err != nil {
			missing = append(missing, p)
			continue
		}
		res.OutputsFound = append(res.OutputsFound, p)
	}
	if len(missing) > 0 {
		res.Error = &queue.ResultError{Phase: queue.PhaseRun, Kind: queue.ErrKindMissingOutput,
			Message: "expected outputs not found in the workspace: " + strings.Join(missing, ", ")}
	}
	return res, nil
}

// runPhase runs the commands of one phase in order, its output going to the
// phase's log file and to a bounded capture. It returns the phase's record,
// the task error if the phase failed, or an error if the worker failed (or
// ctx ended: then ctx's error).
func (e *Executor) runPhase(ctx context.Context, name string, cmds []string, timeout time.Duration, ws string, f *os.File, env []string, maxOut int64) (queue.PhaseResult, *queue.ResultError, error) {
	pr := queue.PhaseResult{Name: name, Started: time.Now().UTC(), LogRef: f.Name()}
	capture := NewCapture(int(min(maxOut, 1<<30)))
	out := io.MultiWriter(capture, &cappedWriter{w: f, left: e.cfg.MaxLogBytes})
	deadline := time.Now().Add(timeout)
	var rerr *queue.ResultError
	for i, line := range cmds {
		fmt.Fprintf(out, "$ %s\n", line)
		left := time.Until(deadline)
		if left <= 0 {
			left = time.Millisecond
		}
		o, err := Run(ctx, Command{Line: line, Dir: ws, Env: env, Timeout: left, KillGrace: e.cfg.KillGrace, Output: out})
		if err != nil {
			return pr, nil, err
		}
		pr.ExitCode = o.ExitCode
		if o.Canceled {
			return pr, nil, ctx.Err()
		}
		if o.TimedOut {
			rerr = &queue.ResultError{Phase: name, Kind: queue.ErrKindTimeout,
				Message: fmt.Sprintf("%s command %d (%s) killed after the phase timeout of %v", name, i+1, firstLine(line), timeout)}
			break
		}
		if o.ExitCode != 0 {
			rerr = &queue.ResultError{Phase: name,
				Message: fmt.Sprintf("%s command %d (%s) exited with status %d", name, i+1, firstLine(line), o.ExitCode)}
			break
		}
	}
	pr.OK = rerr == nil
	pr.DurationMS = time.Since(pr.Started).Milliseconds()
	pr.LogTail = capture.Tail(e.cfg.LogTailBytes)
	return pr, rerr, nil
}

// phaseLogs are the open log files of a task's phases, by phase name.
type phaseLogs struct {
	files map[string]*os.File
	err   error
}

// openLogs creates dir and one <phase>.log per name in it, truncated.
func openLogs(dir string, names []string) phaseLogs {
	l := phaseLogs{files: make(map[string]*os.File, len(names))}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		l.err = fmt.Errorf("create log dir: %w", err)
		return l
	}
	for _, n := range names {
		f, err := os.OpenFile(filepath.Join(dir, n+".log"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			l.err = fmt.Errorf("open phase log: %w", err)
			return l
		}
		l.files[n] = f
	}
	return l
}

func (l phaseLogs) close() {
	for _, f := range l.files {
		f.Close()
	}
}

// freshDir makes dir an empty directory, creating its parents as needed.
// The common case (a first delivery) costs one mkdir.
func freshDir(dir string) error {
	err := os.Mkdir(dir, 0o755)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrExist):
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	return os.MkdirAll(dir, 0o755)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " ..."
	}
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return s
}

// cappedWriter writes up to left bytes, then a marker once, then discards.
type cappedWriter struct {
	w      io.Writer
	left   int64
	marked bool
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	n := len(p)
	if c.left <= 0 {
		if !c.marked {
			c.marked = true
			_, _ = io.WriteString(c.w, "\n[hpcq: log size limit reached, the rest of the output is not logged]\n")
		}
		return n, nil
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	c.left -= int64(len(p))
	if _, err := c.w.Write(p); err != nil {
		c.left = 0 // a full disk must not fail the command
	}
	return n, nil
}
