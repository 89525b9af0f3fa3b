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
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hpcq/hpcq/internal/fileio"
	"github.com/hpcq/hpcq/internal/jsonw"
	"github.com/hpcq/hpcq/pkg/artifacts"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/schema"
	"github.com/hpcq/hpcq/pkg/worker"
	"github.com/nats-io/nats.go/jetstream"
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
	// Installer runs the iterative download phase of a task with Install
	// set; without one such a task fails in its download phase, saying why.
	Installer Installer
	// Sandbox says how commands are isolated; the zero value isolates them
	// where the machine allows (see NewSandbox).
	Sandbox SandboxConfig
	// Pids bounds a task's processes and threads when it sets no
	// limits.pids (cgroup pids.max, with a sandbox) [DefaultPids].
	Pids int
	// DiskMB bounds a task's workspace on disk when it sets no
	// limits.disk_mb [none].
	DiskMB int
	// FinishTimeout bounds everything after a task's last phase: reading
	// its outputs and metrics, looking for its plots, uploading its files.
	// Past it the slot is let go and the result says what was left.
	// Defaults to 5m.
	FinishTimeout time.Duration
	// Shell is ShellPlain (default: bash -c in the login environment,
	// captured once) or ShellLogin (bash -lc per command). A task may ask
	// for ShellLogin.
	Shell string
	// Env is the environment commands start from (WorkerEnv), without the
	// worker's own settings; nil: NewExecutor takes it from WorkerEnv.
	Env []string
	// ArtifactStore, when set, receives every attempt's phase logs, found
	// outputs and plots (*.png, *.svg in the workspace), within
	// ArtifactLimits; the result lists them (queue.Queue.Artifacts).
	ArtifactStore  jetstream.ObjectStore
	ArtifactChunks func(ctx context.Context, nuid string) (uint64, error) // queue.Queue.ArtifactChunks
	ArtifactLimits artifacts.Limits
	// LiveLog, when set, receives each phase's log as the commands write
	// it (scheduler logs --follow); it is closed when the phase's task
	// ends. queue.Queue.LogWriter is the one workers use.
	LiveLog func(t *schema.NodeTask, phase string) io.WriteCloser
	// Recall, when set, stores the recall events of tasks that ask for
	// them (NodeTask.Recall) as each phase happens; without it they come
	// back in the result for the scheduler to store.
	Recall RecallSink
}

// Installer decides the commands of an iterative download phase one at a
// time (the worker asks the model through the scheduler's LLM gateway),
// running each with run, which returns its exit code and the tail of its
// output. A failing command is not the end: the installer sees it and may
// try another. An error from the installer fails the phase.
type Installer func(ctx context.Context, t *schema.NodeTask, run func(ctx context.Context, command string) (exitCode int, output string, err error)) error

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
	if c.FinishTimeout <= 0 {
		c.FinishTimeout = 5 * time.Minute
	}
	return c
}

// Executor runs a task's phases as shell commands in a fresh workspace.
type Executor struct {
	cfg     Config
	baseEnv []string
	sandbox *Sandbox
	// isolation describes the sandbox, or why there is none.
	isolation string
	// v2 limit tasks' memory and processes; nil (v2Why says why): v1.
	v2    *v2Cgroups
	v2Why string
	// v1 limit tasks' processes and, where memory is on cgroup v1, their
	// memory; nil (v1Why says why) without a sandbox or v1 controllers.
	v1    *v1Cgroups
	v1Why string
}

var _ worker.Executor = (*Executor)(nil)

// NewExecutor returns an Executor. The environment of commands is the
// worker's login environment (Config.Env, else captured once: see
// CaptureLoginEnv), without the worker's own settings and secrets (HPCQ_*,
// OPENAI_*, NATS_*), plus the task's variables.
func NewExecutor(cfg Config) (*Executor, error) {
	cfg = cfg.withDefaults()
	abs, err := filepath.Abs(cfg.RunsDir)
	if err != nil {
		return nil, fmt.Errorf("phases: runs dir: %w", err)
	}
	cfg.RunsDir = abs
	sb, desc, err := NewSandbox(context.Background(), cfg.Sandbox, abs)
	if err != nil {
		return nil, err
	}
	base := cfg.Env
	if base == nil {
		if base, err = WorkerEnv(context.Background(), cfg.Shell); err != nil {
			return nil, err
		}
	}
	var env []string
	for _, kv := range base {
		if strings.HasPrefix(kv, "HPCQ_") || strings.HasPrefix(kv, "OPENAI_") || strings.HasPrefix(kv, "NATS_") {
			continue
		}
		env = append(env, kv)
	}
	cg, why := detectV2()
	e := &Executor{cfg: cfg, baseEnv: env, sandbox: sb, isolation: desc, v2: cg, v2Why: why}
	if sb != nil {
		// The sandbox helper joins them: v1 has no CLONE_INTO_CGROUP.
		e.v1, e.v1Why = detectV1()
	} else {
		e.v1Why = "no sandbox to join v1 cgroups"
	}
	return e, nil
}

// Isolation says in one line how the executor isolates commands, or why it
// cannot; workers log it at start.
func (e *Executor) Isolation() string { return e.isolation }

// WorkspaceDir is where a task's files are written and its commands run.
func (e *Executor) WorkspaceDir(t *schema.NodeTask) string {
	return filepath.Join(e.cfg.RunsDir, t.RunID, "workspaces", t.NodeID, strconv.Itoa(t.Attempt))
}

// LogDir is where a task's phase logs go.
func (e *Executor) LogDir(t *schema.NodeTask) string {
	return filepath.Join(e.cfg.RunsDir, t.RunID, "phase_logs", "node_"+t.NodeID)
}

func seconds(s int, def time.Duration) time.Duration {
	if s > 0 {
		return time.Duration(s) * time.Second
	}
	return def
}

// Execute writes the workspace, then runs the download, compile and run
// commands, stopping at the first failure, then checks the expected outputs
// and extracts the metrics. With Config.Artifacts it then uploads the
// attempt's files; an upload that fails is said in the result, which
// stands. What follows the last phase is bounded by Config.FinishTimeout
// (not by ctx: a drain does not lose the result of a task that ran).
func (e *Executor) Execute(ctx context.Context, t *schema.NodeTask, slot worker.Slot) (*schema.NodeResult, error) {
	var fin finishClock
	res, err := e.execute(ctx, t, slot, &fin)
	if err != nil || e.cfg.ArtifactStore == nil {
		return res, err
	}
	fctx, cancel := fin.context(ctx, e.cfg.FinishTimeout)
	defer cancel()
	up := artifacts.Uploader{Store: e.cfg.ArtifactStore, Chunks: e.cfg.ArtifactChunks, Limits: e.cfg.ArtifactLimits}
	files, walkNote := e.artifactFiles(fctx, t, res)
	arts, note, uerr := up.Upload(fctx, t, files)
	notes := []string{walkNote, note}
	if uerr != nil {
		notes = append(notes, uerr.Error())
	}
	if fctx.Err() != nil {
		notes = append(notes, fin.passed(e.cfg.FinishTimeout))
	}
	res.Artifacts, res.ArtifactsNote = arts, joinNotes(notes...)
	return res, nil
}

// finishClock starts when a task's last phase ends (or when it failed
// before: whatever comes first).
type finishClock struct{ at time.Time }

func (f *finishClock) start() {
	if f.at.IsZero() {
		f.at = time.Now()
	}
}

// context is bounded by limit from the clock's start, and not canceled
// with parent.
func (f *finishClock) context(parent context.Context, limit time.Duration) (context.Context, context.CancelFunc) {
	f.start()
	return context.WithDeadline(context.WithoutCancel(parent), f.at.Add(limit))
}

func (f *finishClock) passed(limit time.Duration) string {
	return fmt.Sprintf("the task's finish deadline (%v after its last phase, HPCQ_TASK_FINISH_TIMEOUT) passed: what was not looked at or uploaded by then was left", limit)
}

// joinNotes joins the non-empty notes with "; ".
func joinNotes(notes ...string) string {
	var out []string
	for _, n := range notes {
		if n = strings.Trim(n, "; "); n != "" {
			out = append(out, n)
		}
	}
	return strings.Join(out, "; ")
}

// artifactFiles are the files of an attempt to bring home: the phase logs,
// the expected outputs found, and the plots (*.png, *.svg) of the
// workspace, not following symbolic links; note says what the plot walk
// left out.
func (e *Executor) artifactFiles(ctx context.Context, t *schema.NodeTask, res *schema.NodeResult) (files []artifacts.File, note string) {
	logDir := e.LogDir(t)
	for _, p := range res.Phases {
		if p.Name == schema.PhaseCoding {
			continue
		}
		files = append(files, artifacts.File{Kind: schema.ArtifactLog, Name: p.Name + ".log", Dir: logDir, Rel: p.Name + ".log"})
	}
	ws := e.WorkspaceDir(t)
	outputs := map[string]bool{}
	for _, o := range res.OutputsFound {
		outputs[o] = true
		files = append(files, artifacts.File{Kind: schema.ArtifactOutput, Name: o, Dir: ws, Rel: o})
	}
	plots, note := findPlots(ctx, ws, outputs)
	for _, rel := range plots {
		files = append(files, artifacts.File{Kind: schema.ArtifactPlot, Name: filepath.ToSlash(rel), Dir: ws, Rel: rel})
	}
	return files, note
}

func (e *Executor) execute(ctx context.Context, t *schema.NodeTask, slot worker.Slot, fin *finishClock) (*schema.NodeResult, error) {
	res := &schema.NodeResult{Started: time.Now().UTC()}
	rec := e.recorder(ctx, t)
	defer func() {
		res.DurationMS = time.Since(res.Started).Milliseconds()
		rec.finish(res)
	}()
	defer fin.start() // at the latest

	ws := e.WorkspaceDir(t)
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
	// The log files (and artifacts.json) are made while the workspace is:
	// on disks where a mkdir costs a fraction of a millisecond, this takes
	// them off the task's critical path.
	logsReady := make(chan phaseLogs, 1)
	go func() { logsReady <- openLogs(e.LogDir(t), names, &t.Artifacts) }()
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
	coding := schema.PhaseResult{Name: schema.PhaseCoding, OK: werr == nil, Started: start.UTC(), DurationMS: time.Since(start).Milliseconds()}
	if werr != nil {
		coding.ExitCode = -1
		coding.LogTail = werr.Error()
		res.Phases = append(res.Phases, coding)
		rec.add(memory.EventErrorEncountered, schema.PhaseCoding, werr.Error())
		if errors.Is(werr, ErrInvalidWorkspace) {
			res.Error = &schema.ResultError{Phase: schema.PhaseCoding, Kind: schema.ErrKindInvalidWorkspace, Message: werr.Error()}
			return res, nil
		}
		return nil, werr
	}
	res.Phases = append(res.Phases, coding)
	rec.add(memory.EventPhaseComplete, schema.PhaseCoding, filesWritten(files))
	user, userWhy := e.sandbox.ForSlot(slot.Index)
	res.Isolation = e.sandbox.Isolation(t.Limits.NoNetwork(), e.isolation, user, userWhy)
	if err := e.sandbox.ChownWorkspace(ws, user); err != nil {
		return nil, fmt.Errorf("workspace for the sandbox user: %w", err)
	}

	env := append(append([]string(nil), e.baseEnv...),
		"HPCQ_RUN_ID="+t.RunID, "HPCQ_NODE_ID="+t.NodeID, "HPCQ_ATTEMPT="+strconv.Itoa(t.Attempt),
		"HPCQ_WORKSPACE="+ws, "OMP_NUM_THREADS="+strconv.Itoa(max(1, slot.Cores)))
	if len(slot.GPUs) > 0 {
		env = append(env, "CUDA_VISIBLE_DEVICES="+strings.Join(slot.GPUs, ","))
	}
	for k, v := range t.Env {
		env = append(env, k+"="+v)
	}
	maxOut := e.cfg.MaxOutputBytes
	if t.Limits.MaxOutputBytes > 0 {
		maxOut = t.Limits.MaxOutputBytes
	}
	run := phaseRun{ws: ws, env: env, maxOut: maxOut, noNetwork: t.Limits.NoNetwork(),
		login: e.cfg.Shell == ShellLogin || t.Shell == ShellLogin, rlimits: Rlimits{
			AddressSpaceMB: t.Limits.AddressSpaceMB, FileSizeMB: t.Limits.FileSizeMB, OpenFiles: t.Limits.OpenFiles}}
	if e.sandbox != nil {
		run.tmpMB = e.sandbox.TmpMB(t.Limits.MemoryMB)
	}
	run.user = user
	if e.sandbox != nil {
		run.box = &attemptSandbox{}
	}
	run.diskMB = t.Limits.DiskMB
	if run.diskMB == 0 {
		run.diskMB = e.cfg.DiskMB
	}
	res.Limits = e.enforce(t, slot, &run)
	defer run.release(res)
	met, err := newMetrics(t.Artifacts.Run.MetricPatterns)
	if err != nil { // Validate compiled them already
		res.Error = &schema.ResultError{Phase: schema.PhaseRun, Kind: schema.ErrKindInvalidTask, Message: err.Error()}
		return res, nil
	}
	if err := logs().err; err != nil {
		return nil, err
	}
	if e.cfg.LiveLog != nil {
		run.live = make(map[string]io.Writer, len(names))
		for _, n := range names {
			lw := e.cfg.LiveLog(t, n)
			run.live[n] = lw
			defer lw.Close()
		}
	}
	for _, ph := range phases {
		if ph.name == schema.PhaseDownload && t.Install != nil {
			rec.add(memory.EventPhaseStarted, ph.name, strings.TrimSpace(phaseStarted(ph.cmds)+fmt.Sprintf("\nthen up to %d install commands asked of the model", t.Install.MaxSteps)))
			pr, rerr, err := e.iterativeDownload(ctx, t, ph, run, logs().files[ph.name])
			if err != nil {
				return nil, err
			}
			res.Phases = append(res.Phases, pr)
			rec.phaseEnded(pr, rerr)
			if rerr != nil {
				res.Error = rerr
				return res, nil
			}
			continue
		}
		if len(ph.cmds) == 0 {
			continue
		}
		var diags *diagnostics
		var stdoutLine func(string)
		switch ph.name {
		case schema.PhaseCompile:
			diags = &diagnostics{}
		case schema.PhaseRun:
			stdoutLine = met.stdoutLine
		}
		rec.add(memory.EventPhaseStarted, ph.name, phaseStarted(ph.cmds))
		pr, rerr, err := e.runPhase(ctx, ph, run, logs().files[ph.name], diags, stdoutLine)
		if err != nil {
			return nil, err
		}
		res.Phases = append(res.Phases, pr)
		if diags != nil && rerr != nil {
			res.Diagnostics = diags.errorsFirst()
			if len(res.Diagnostics) > 0 {
				d := res.Diagnostics[0]
				rerr.Message += fmt.Sprintf("; first diagnostic: %s:%d:%d: %s: %s", d.File, d.Line, d.Column, d.Severity, d.Message)
				var b strings.Builder
				for _, d := range res.Diagnostics[:min(10, len(res.Diagnostics))] {
					fmt.Fprintf(&b, "%s:%d:%d: %s: %s\n", d.File, d.Line, d.Column, d.Severity, d.Message)
				}
				rec.add(memory.EventCompileDiagnostics, ph.name, strings.TrimSpace(b.String()))
			}
		}
		rec.phaseEnded(pr, rerr)
		if rerr != nil {
			res.Error = rerr
			return res, nil
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	fin.start()
	if len(t.Artifacts.Run.Commands) == 0 && len(t.Artifacts.Run.ExpectedOutputs) == 0 {
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
		fi, err := root.Stat(p)
		switch {
		case err != nil:
			missing = append(missing, p)
			continue
		case !fi.Mode().IsRegular() && !fi.IsDir():
			// A named pipe or socket: nothing to read or bring home.
			missing = append(missing, p+" ("+fileio.TypeName(fi.Mode())+")")
			continue
		}
		res.OutputsFound = append(res.OutputsFound, p)
	}
	if len(t.Artifacts.Run.Commands) > 0 {
		if data, err := readSmall(root, "metrics.json", 1<<20); err == nil {
			met.file(data)
		} else if !errors.Is(err, os.ErrNotExist) {
			met.badf("%s: %v", sourceFile, err)
		}
	}
	var bad []string
	res.Metrics, res.MetricUnits, bad = met.finish()
	switch {
	case len(missing) > 0:
		rec.add(memory.EventOutputsMissing, schema.PhaseRun, "expected outputs not found: "+strings.Join(missing, ", "))
	case len(res.OutputsFound) > 0:
		rec.add(memory.EventOutputsFound, schema.PhaseRun, strings.Join(res.OutputsFound, ", "))
	}
	if len(res.Metrics) > 0 {
		rec.add(memory.EventMetricExtracted, schema.PhaseRun, metricsText(res.Metrics, res.MetricUnits))
	}
	if len(bad) > 0 {
		rec.add(memory.EventMetricsBad, schema.PhaseRun, strings.Join(bad, "; "))
	}
	switch {
	case len(missing) > 0:
		res.Error = &schema.ResultError{Phase: schema.PhaseRun, Kind: schema.ErrKindMissingOutput,
			Message: "expected outputs not found in the workspace: " + strings.Join(missing, ", ")}
	case len(bad) > 0:
		res.Error = &schema.ResultError{Phase: schema.PhaseRun, Kind: schema.ErrKindBadMetric,
			Message: "bad metrics: " + strings.Join(bad, "; ")}
	}
	return res, nil
}

// readSmall reads name from root, refusing more than limit bytes and
// anything but a regular file (opened without following a link or
// blocking: a named pipe there does not hold the slot).
func readSmall(root *os.Root, name string, limit int64) ([]byte, error) {
	f, fi, err := fileio.OpenRegular(root, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, at most %d", name, fi.Size(), limit)
	}
	return io.ReadAll(io.LimitReader(f, limit))
}

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
	// box is the attempt's sandbox, opened by its first command (nil: no
	// sandbox).
	box    *attemptSandbox
	diskMB int // the workspace's bound on disk (0: none)
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
		what := fmt.Sprintf("%s command %d (%s)", ph.name, i+1, firstLine(line))
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

// phaseLogs are the open log files of a task's phases, by phase name.
type phaseLogs struct {
	files map[string]*os.File
	err   error
}

// openLogs creates dir, writes artifacts.json (the task's artifacts as
// received) in it, and opens one <phase>.log per name, truncated.
func openLogs(dir string, names []string, artifacts *schema.Artifacts) phaseLogs {
	l := phaseLogs{files: make(map[string]*os.File, len(names))}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		l.err = fmt.Errorf("create log dir: %w", err)
		return l
	}
	data, err := jsonw.MarshalIndent(artifacts)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "artifacts.json"), append(data, '\n'), 0o644)
	}
	if err != nil {
		l.err = fmt.Errorf("write artifacts.json: %w", err)
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
	// 0700: other users of the machine do not read a task's workspace
	// (the sandbox hides the others from a task).
	err := os.Mkdir(dir, 0o700)
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
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	return os.Mkdir(dir, 0o700)
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
