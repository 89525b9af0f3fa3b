package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hpcq/hpcq/internal/artifacts"
	"github.com/hpcq/hpcq/internal/fileio"
	"github.com/hpcq/hpcq/internal/image"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/schema"
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
	Workspace schema.WorkspaceLimits
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
	// Images is where the images tasks name are kept unpacked.
	Images ImagesConfig
	// GPUMPS is MPSAuto (default), MPSOff, or the MPS pipe directory of
	// the site's daemon: the tasks that share a GPU use it (see mpsPipe).
	GPUMPS string
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
	if c.Images.Log == nil {
		c.Images.Log = slog.Default()
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
	// mps is the MPS pipe directory GPU tasks use, or "" (mpsPipe).
	mps string
	// isolation describes the sandbox, or why there is none.
	isolation string
	// v2 limit tasks' memory and processes; nil (v2Why says why): v1.
	v2    *v2Cgroups
	v2Why string
	// v1 limit tasks' processes and, where memory is on cgroup v1, their
	// memory; nil (v1Why says why) without a sandbox or v1 controllers.
	v1    *v1Cgroups
	v1Why string
	// images is the cache of the images tasks name, opened by the first.
	trash       trashState // layer directories being removed (layerdir.go)
	imagesMu    sync.Mutex
	images      *image.Cache
	imagePolicy image.Policy                 // ImagesConfig.Dirs, checked at start
	scaffolds   map[string]string            // an image tree's scaffold (scaffold.go), under imagesMu
	imageTools  map[string]map[string]string // an image's toolchains, by digest (path for a directory)
	gpuOnce     sync.Once
	gpuFiles    []string // the host's GPU driver files a container binds (gpuBinds)
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
	mps, err := mpsPipe(cfg.GPUMPS, os.Getenv)
	if err != nil {
		return nil, err
	}
	policy, err := image.NewPolicy(cfg.Images.Dirs, cfg.Images.Own...)
	if err != nil {
		return nil, fmt.Errorf("phases: %w", err)
	}
	if mps != "" {
		// The clients write the daemon's pipes: under a sandbox's private
		// /tmp they would not see them.
		cfg.Sandbox.Writable = append(slices.Clip(cfg.Sandbox.Writable), mps)
	}
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
	e := &Executor{cfg: cfg, baseEnv: env, sandbox: sb, isolation: desc, v2: cg, v2Why: why, mps: mps, imagePolicy: policy}
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

// Execute writes the workspace, then runs the download, compile and run
// commands, stopping at the first failure, then checks the expected outputs
// and extracts the metrics. With Config.Artifacts it then uploads the
// attempt's files; an upload that fails is said in the result, which
// stands. What follows the last phase is bounded by Config.FinishTimeout
// (not by ctx: a drain does not lose the result of a task that ran).
func (e *Executor) Execute(ctx context.Context, t *schema.NodeTask, slot worker.Slot) (*schema.NodeResult, error) {
	var fin finishClock
	res, err := e.execute(ctx, t, slot, &fin)
	if err == nil && res.Error == nil && t.Evaluate != nil {
		err = e.evaluate(ctx, t, slot, res)
	}
	if err == nil {
		if lost := nodeLost(slot, res); lost != "" {
			return nil, fmt.Errorf("%w: %s", worker.ErrNodeLost, lost)
		}
	}
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

func (e *Executor) execute(ctx context.Context, t *schema.NodeTask, slot worker.Slot, fin *finishClock) (*schema.NodeResult, error) {
	res := &schema.NodeResult{Started: time.Now().UTC()}
	rec := e.recorder(ctx, t)
	defer func() {
		res.DurationMS = time.Since(res.Started).Milliseconds()
		rec.finish(res)
	}()
	defer fin.start() // at the latest

	ws := e.WorkspaceDir(t)
	phases, names := e.phaseSpecs(t)
	logs := e.openLogsAsync(t, names)
	defer func() { logs().close() }()
	layer := e.startLayerDir(t) // while the workspace is written
	defer e.releaseLayerDir(layer)

	// A fresh directory per (node, attempt): nothing of an earlier delivery
	// of the same attempt survives.
	if err := freshDir(ws); err != nil {
		return nil, fmt.Errorf("create workspace: %w", err)
	}

	if ok, err := e.coding(ws, t, res, rec); err != nil {
		return nil, err
	} else if !ok {
		return res, nil
	}
	ctr, user, done, err := e.placeTask(ctx, t, ws, slot, layer, res)
	// done is deferred before run.release: it runs once the attempt's
	// sandbox is gone, and keeps the container's layer.
	defer done()
	if err != nil {
		return nil, err
	}
	if res.Error != nil {
		return res, nil
	}

	run := e.newPhaseRun(t, slot, ws, user)
	run.ctr = ctr
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
	defer e.openLive(t, names, &run)()
	samples, runStart, err := e.phases(ctx, t, phases, run, logs().files, met, res, rec)
	if err != nil {
		return nil, err
	}
	if res.Error != nil {
		return res, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	fin.start()
	if len(t.Artifacts.Run.Commands) == 0 && len(t.Artifacts.Run.ExpectedOutputs) == 0 {
		return res, nil
	}
	if err := collect(t, ws, res, met, rec); err != nil {
		return nil, err
	}
	if t.Measure != nil && t.Evaluate == nil {
		measured(t, res, samples, runStart)
	}
	return res, nil
}

// phases runs the task's phases in order until one fails (res.Error);
// a measured run phase gives its samples and when it started.
func (e *Executor) phases(ctx context.Context, t *schema.NodeTask, phases []phaseSpec, run phaseRun, logs map[string]*os.File, met *metrics,
	res *schema.NodeResult, rec *recorder) (samples []schema.EvalSample, runStart time.Time, err error) {
	runStart = time.Now()
	for _, ph := range phases {
		var rerr *schema.ResultError
		switch {
		case ph.name == schema.PhaseDownload && t.Install != nil:
			rerr, err = e.installPhase(ctx, t, ph, run, logs[ph.name], res, rec)
		case ph.name == schema.PhaseRun && len(ph.cmds) > 0 && t.Measure != nil && t.Evaluate == nil:
			runStart = time.Now()
			rerr, samples, err = e.measuredRun(ctx, t, ph, run, logs[ph.name], met, res, rec)
		case len(ph.cmds) > 0:
			rerr, err = e.commandsPhase(ctx, ph, run, logs[ph.name], met, res, rec)
		}
		if err != nil {
			return nil, runStart, err
		}
		if rerr != nil {
			res.Error = rerr
			return nil, runStart, nil
		}
	}
	return samples, runStart, nil
}

// placeTask is where task t's commands run: its container (nil: the
// host), its user, and what to do once they have run (keep the
// container's layer, let its image go). A task that cannot run there gets
// res.Error.
func (e *Executor) placeTask(ctx context.Context, t *schema.NodeTask, ws string, slot worker.Slot, layer *pendingLayer, res *schema.NodeResult) (*containerRun, *TaskUser, func(), error) {
	user, err := e.taskUser(t, ws, slot, res)
	if err != nil {
		return nil, nil, func() {}, err
	}
	ctr, err := e.container(ctx, t, user, layer, res)
	if err != nil || res.Error != nil {
		return nil, nil, func() {}, err
	}
	if ctr != nil {
		ctr.gpus = len(slot.GPUs) > 0
		if ctr.gpus && ctr.site == nil {
			ctr.binds = e.gpuBinds(ctx)
			for _, b := range ctr.binds {
				res.Container.GPUDriver = append(res.Container.GPUDriver, path.Base(b.Src))
			}
		}
	}
	return ctr, user, func() {
		if ctr != nil {
			if ctr.upper != "" {
				e.seal(ctx, ctr, ws, user, res.Container)
			}
			ctr.release()
		}
	}, nil
}

// openLogsAsync makes the phases' log files (and artifacts.json) while
// the workspace is made: on disks where a mkdir costs a fraction of a
// millisecond, this takes them off the task's critical path.
func (e *Executor) openLogsAsync(t *schema.NodeTask, names []string) func() phaseLogs {
	ready := make(chan phaseLogs, 1)
	go func() { ready <- openLogs(e.LogDir(t), names, &t.Artifacts) }()
	return sync.OnceValue(func() phaseLogs { return <-ready })
}

// taskUser is the user the slot's commands run as, with the workspace
// given to it, and the result's account of the isolation.
func (e *Executor) taskUser(t *schema.NodeTask, ws string, slot worker.Slot, res *schema.NodeResult) (*TaskUser, error) {
	user, why := e.sandbox.ForSlot(slot.Index)
	res.Isolation = e.sandbox.Isolation(t.Limits.NoNetwork(), e.isolation, user, why)
	if err := e.sandbox.ChownWorkspace(ws, user); err != nil {
		return nil, fmt.Errorf("workspace for the sandbox user: %w", err)
	}
	return user, nil
}

// openLive gives each phase that runs its live log stream (LiveLog), and
// returns what closes them.
func (e *Executor) openLive(t *schema.NodeTask, names []string, run *phaseRun) func() {
	if e.cfg.LiveLog == nil {
		return func() {}
	}
	run.live = make(map[string]io.Writer, len(names))
	var open []io.Closer
	for _, n := range names {
		lw := e.cfg.LiveLog(t, n)
		run.live[n] = lw
		open = append(open, lw)
	}
	return func() {
		for _, lw := range open {
			lw.Close()
		}
	}
}

// coding writes the task's files into the workspace ws: the coding phase.
// A file the rules refuse ends the task (ok false, res says why); an error
// is the worker's.
func (e *Executor) coding(ws string, t *schema.NodeTask, res *schema.NodeResult, rec *recorder) (ok bool, err error) {
	start := time.Now()
	files := t.Artifacts.Coding.Workspace.Files
	werr := WriteFiles(ws, files, e.cfg.Workspace)
	coding := schema.PhaseResult{Name: schema.PhaseCoding, OK: werr == nil, Started: start.UTC(), DurationMS: time.Since(start).Milliseconds()}
	if werr == nil {
		res.Phases = append(res.Phases, coding)
		rec.add(memory.EventPhaseComplete, schema.PhaseCoding, filesWritten(files))
		return true, nil
	}
	coding.ExitCode = -1
	coding.LogTail = werr.Error()
	res.Phases = append(res.Phases, coding)
	rec.add(memory.EventErrorEncountered, schema.PhaseCoding, werr.Error())
	if errors.Is(werr, schema.ErrInvalidWorkspace) {
		res.Error = &schema.ResultError{Phase: schema.PhaseCoding, Kind: schema.ErrKindInvalidWorkspace, Message: werr.Error()}
		return false, nil
	}
	return false, werr
}

// installPhase runs the download phase with the iterative installer: its
// commands, then up to Install.MaxSteps more asked of the model.
func (e *Executor) installPhase(ctx context.Context, t *schema.NodeTask, ph phaseSpec, run phaseRun, log *os.File, res *schema.NodeResult,
	rec *recorder) (*schema.ResultError, error) {
	rec.add(memory.EventPhaseStarted, ph.name, strings.TrimSpace(phaseStarted(ph.cmds)+fmt.Sprintf("\nthen up to %d install commands asked of the model", t.Install.MaxSteps)))
	pr, rerr, err := e.iterativeDownload(ctx, t, ph, run, log)
	if err != nil {
		return nil, err
	}
	res.Phases = append(res.Phases, pr)
	rec.phaseEnded(pr, rerr)
	return rerr, nil
}

// commandsPhase runs a phase of commands (compile, run, a download
// without the installer) and adds its result to res: the compiler's
// diagnostics, errors first, for a failed compile; the metrics of the run's
// stdout. Its ResultError is the task's failure, its error the worker's.
func (e *Executor) commandsPhase(ctx context.Context, ph phaseSpec, run phaseRun, log *os.File, met *metrics, res *schema.NodeResult,
	rec *recorder) (*schema.ResultError, error) {
	var diags *diagnostics
	var stdoutLine func(string)
	switch ph.name {
	case schema.PhaseCompile:
		diags = &diagnostics{}
	case schema.PhaseRun:
		stdoutLine = met.stdoutLine
	}
	rec.add(memory.EventPhaseStarted, ph.name, phaseStarted(ph.cmds))
	pr, rerr, err := e.runPhase(ctx, ph, run, log, diags, stdoutLine)
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
	return rerr, nil
}

// collect reads what the run phase left: the expected outputs (found,
// missing, or not a file to bring home), the metrics file, and the
// metrics of every source; it sets res's outputs, metrics and error (a
// missing output, a bad metric) and records what it found. Its error is
// the worker's (the workspace cannot be opened).
func collect(t *schema.NodeTask, ws string, res *schema.NodeResult, met *metrics, rec *recorder) error {
	root, err := os.OpenRoot(ws)
	if err != nil {
		return fmt.Errorf("open workspace: %w", err)
	}
	defer root.Close()
	var missing []string
	for _, p := range t.Artifacts.Run.ExpectedOutputs {
		if schema.CheckPath(p) != nil {
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
	return nil
}

// newPhaseRun is what every command of t's attempt in ws shares: its
// environment (the worker's, the task's ids and workspace, its threads
// and GPUs, the task's own variables), output bound, rlimits, network,
// shell, /tmp bound, user, sandbox and disk bound. The limits of the
// slot are added by enforce.
func (e *Executor) newPhaseRun(t *schema.NodeTask, slot worker.Slot, ws string, user *TaskUser) phaseRun {
	env := append(append([]string(nil), e.baseEnv...),
		"HPCQ_RUN_ID="+t.RunID, "HPCQ_NODE_ID="+t.NodeID, "HPCQ_ATTEMPT="+strconv.Itoa(t.Attempt),
		"HPCQ_WORKSPACE="+ws, "OMP_NUM_THREADS="+strconv.Itoa(max(1, slot.Cores)))
	env = append(append(env, e.gpuEnv(slot)...), mpiEnv(slot)...)
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
	run.user, run.diskMB = user, cmpOr(t.Limits.DiskMB, e.cfg.DiskMB)
	if e.sandbox != nil {
		run.tmpMB = e.sandbox.TmpMB(t.Limits.MemoryMB)
		run.box = &attemptSandbox{}
	}
	return run
}
