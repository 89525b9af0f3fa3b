package schedcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/hpcq/hpcq/internal/cli"
	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/dispatch"
	"github.com/hpcq/hpcq/internal/engine"
	"github.com/hpcq/hpcq/internal/gate"
	"github.com/hpcq/hpcq/internal/linelog"
	"github.com/hpcq/hpcq/internal/metrics"
	"github.com/hpcq/hpcq/internal/run"
	"github.com/hpcq/hpcq/internal/runview"
	"github.com/hpcq/hpcq/internal/session"
	"github.com/hpcq/hpcq/internal/stores"
	"github.com/hpcq/hpcq/internal/term"
	"github.com/hpcq/hpcq/internal/version"
	"github.com/hpcq/hpcq/internal/web"
	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// ideaCassette is the scripted cassette of an idea directory.
const ideaCassette = "cassette.jsonl"

// selfPath is the running scheduler binary's path, for hints to type.
func selfPath() string {
	if exe, err := os.Executable(); err == nil {
		return exe
	}
	return os.Args[0]
}

// loadIdea reads an idea directory (run.LoadIdeaDir).
func loadIdea(dir string) (run.Spec, error) {
	if _, err := os.Stat(filepath.Join(dir, run.SpecFile)); err != nil {
		return run.Spec{}, fmt.Errorf("%s is not an idea directory (run.yaml, idea.md, resources.yaml): %w", dir, err)
	}
	return run.LoadIdeaDir(dir)
}

// runLLM picks the run's model: HPCQ_LLM_REPLAY; else the endpoint of
// OPENAI_BASE_URL / OPENAI_API_KEY (model from HPCQ_LLM_MODEL or run.yaml);
// else the idea directory's scripted cassette, said loudly. HPCQ_LLM_MODEL
// becomes the spec's model: every request names it.
func runLLM(spec *run.Spec, ideaDir, runDir string, log *slog.Logger) (llm.Client, func() error, map[string]string, error) {
	c, info, err := llmChoice(*spec, ideaDir)
	if err != nil {
		return nil, nil, nil, err
	}
	spec.LLM.Model = c.Model
	if info["backend"] == "openai" {
		if err := spec.CheckBudgetPriced(c.Model, c.Serves); err != nil {
			return nil, nil, nil, fmt.Errorf("%w: %w", cli.ErrInvalidInput, err)
		}
	}
	if info["scripted"] != "" {
		delete(info, "scripted")
		fmt.Printf("no model configured: replaying the scripted replies of %s (not a live model; set OPENAI_API_KEY for one)\n", c.Replay)
	}
	client, closeFn, err := stores.LLM(c, runSettings(*spec), log)
	if err != nil {
		return nil, nil, nil, err
	}
	if info["backend"] == "openai" {
		// What every request looks like, in the log and in run.json.
		if p, err := stores.LLMProfile(c, runSettings(*spec)); err == nil {
			info["sends"] = p.String()
			log.Info("llm", "sends", info["sends"])
		}
	}
	// Identical reproducible requests are answered from the run's cache
	// (and the shared one): a resumed run, or a later run of the idea
	// through HPCQ_LLM_CACHE, does not pay for them twice.
	cache := &llm.Cache{Client: client, Dirs: []string{rundir.Dir(runDir).Path(rundir.LLMCacheDir)}, All: spec.LLM.Cache, Model: c.Model, Logger: log}
	if c.Cache != "" {
		cache.Dirs = append(cache.Dirs, c.Cache)
		info["cache"] = c.Cache
	}
	return cache, closeFn, info, nil
}

// runSettings are run.yaml's settings of the endpoint client.
func runSettings(spec run.Spec) llm.RunSettings {
	return llm.RunSettings{Reasoning: spec.LLM.Reasoning, MaxTokensCap: spec.LLM.MaxTokensCap}
}

// llmChoice is the model runLLM picks, and what run.json says of it
// ("scripted" set when it is the idea directory's cassette).
func llmChoice(spec run.Spec, ideaDir string) (config.LLM, map[string]string, error) {
	c, err := config.LoadLLM()
	if err != nil {
		return c, nil, err
	}
	if c.Model == "" {
		c.Model = spec.LLM.Model
	}
	info := map[string]string{}
	switch {
	case c.Replay != "":
		info["backend"], info["cassette"] = "replay", c.Replay
	case c.APIKey != "" || c.BaseURL != "":
		info["backend"], info["model"], info["base_url"] = "openai", c.Model, config.RedactURL(c.BaseURL)
		if c.Record != "" {
			info["record"] = c.Record
		}
	default:
		cassette := filepath.Join(ideaDir, ideaCassette)
		if _, err := os.Stat(cassette); err != nil {
			return c, nil, errors.New("no model configured: set OPENAI_API_KEY (and OPENAI_BASE_URL, HPCQ_LLM_MODEL) for a live model, " +
				"or HPCQ_LLM_REPLAY to a cassette")
		}
		c.Replay = cassette
		info["backend"], info["cassette"], info["scripted"] = "replay", cassette, "true"
	}
	return c, info, nil
}

// logClose calls close and logs its failure: for what a command closes on
// its way out, when the command's own result is already decided.
func logClose(log *slog.Logger, what string, close func() error) {
	if err := close(); err != nil {
		log.Error(what, "err", err)
	}
}

// RunOptions are what `scheduler run` is asked.
type RunOptions struct {
	Local bool
	// Abandon, closed, ends the wait for the writes still in the spools
	// when the run ends (a second interrupt).
	Abandon <-chan struct{}
	// IdeaDir starts a new run in RunDir (default: the runs directory's
	// <run id>); Resume continues the run in that directory instead.
	IdeaDir, RunDir, Resume string
	// WaitWorkers bounds the wait for a live worker at start.
	WaitWorkers time.Duration
	// Status, when stdout is a terminal, shows the progress in place (the
	// log must write through the same Screen); nil: a line every 10 s.
	Status engine.StatusLine
	// MetricsAddr serves Prometheus metrics at /metrics while the run goes.
	MetricsAddr string
	// HTTP serves the dashboard, the JSON API and /metrics while the run
	// goes.
	HTTP string
	Log  *slog.Logger
}

// Run is `scheduler run`: the tree search of an idea, or the resume of a
// run. A run that ends with no node producing the metric returns
// ExitError(1); one interrupted returns the reason.
func Run(ctx context.Context, cfg *config.Scheduler, o RunOptions) error {
	log := o.Log
	var err error
	local := o.Local || cfg.NATS.URL == ""
	mode := "cluster"
	if local {
		mode = "local"
	}
	// The dashboard's address is checked (and taken) before anything starts.
	var httpLn net.Listener
	if o.HTTP != "" {
		if httpLn, err = web.Listen(o.HTTP, os.Getenv(web.TokenEnv)); err != nil {
			return fmt.Errorf("%w: %w", cli.ErrInvalidInput, err)
		}
		defer httpLn.Close()
	}

	spec, info, runDir, err := runSpec(cfg, o, mode, log)
	if err != nil {
		return err
	}
	dir, err := claimRunDir(runDir, o.Resume == "", log)
	if err != nil {
		return err
	}
	defer dir.release()

	client, closeLLM, llmInfo, err := runLLM(&spec, info.IdeaDir, runDir, log)
	if err != nil {
		return err
	}
	defer logClose(log, "llm: the cassette or cache", closeLLM)
	info.LLM = llmInfo
	sink, where, err := stores.OpenResults(ctx, cfg.Store, rundir.Dir(runDir), log)
	if err != nil {
		return err
	}
	// Workers write the rows of their results when they can reach the
	// store: in-process workers, and remote ones when it is ClickHouse.
	workersWrite := local || cfg.Store.ClickHouseDSN != ""
	defer logClose(log, "results", sink.Close)
	info.Results = where

	store, memInfo, closeMemory, err := runMemory(ctx, cfg, spec, runDir, log)
	if err != nil {
		return err
	}
	defer logClose(log, "memory", closeMemory)
	info.Memory = memInfo
	calls, closeCalls, err := memoryCallLog(spec, runDir)
	if err != nil {
		return err
	}
	defer logClose(log, "memory call log", closeCalls)
	q, gw, ctx, natsURL, closeQueue, err := searchQueue(ctx, cfg, local, runDir, spec.Pool, specImages(spec), sink, store, log)
	if err != nil {
		return err
	}
	defer closeQueue()
	info.NATSURL = natsURL
	if err := rundir.Dir(runDir).WriteInfo(info); err != nil {
		return err
	}
	dir.started = true
	met, stopObservers, err := runObservers(ctx, cfg, o, httpLn, runDir, store, q, log)
	if err != nil {
		return err
	}
	defer stopObservers()
	fmt.Printf("run %s (%s mode): %s\n", filepath.Base(runDir), mode, runDir)
	return runSearch(ctx, cfg, info, session.Params{Spec: spec, RunDir: runDir, LLM: client, MemoryStore: store, MemoryCalls: calls,
		Results: sink, OutageMax: cfg.OutageMax, Metrics: met, Logger: log}, engine.Params{
		Queue: q, Results: sink, WorkersWriteResults: workersWrite, Mode: mode, WaitWorkers: o.WaitWorkers, Gateway: gw, Abandon: o.Abandon,
		Status: o.Status, Progress: term.Stdout(),
	})
}

// runSearch runs the tree search in one session with the run's model and
// memory, then, with writeup.enabled, has the same session write the paper.
func runSearch(ctx context.Context, cfg *config.Scheduler, info rundir.Info, sp session.Params, p engine.Params) error {
	s, err := session.Open(sp)
	if err != nil {
		return err
	}
	defer s.Close()
	sum, runErr := engine.Run(ctx, s, p)
	if runErr == nil && sum.HasBest {
		runErr = heldOutGate(ctx, s, p)
	}
	if err := endRun(s.Spec, s.Dir, sum, runErr); err != nil || !s.Spec.Writeup.Enabled {
		return err
	}
	runWriteup(ctx, cfg, paperRun{info: info, s: s})
	return nil
}

// heldOutGate runs the held-out gate of a search that ended (run.yaml
// evaluation.harness.held_out) and writes report.md again with it; an
// error means ctx ended (the run is resumable: the gate runs again, its
// answered tasks not redone).
func heldOutGate(ctx context.Context, s *session.Session, p engine.Params) error {
	_, ok, err := gate.Run(ctx, s, gate.Params{Queue: p.Queue, WorkersWriteResults: p.WorkersWriteResults})
	if !ok {
		return nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("run %s interrupted in its held-out gate (resume with --resume %s): %w", s.RunID, s.Dir, err)
		}
		s.Log.Error("held-out gate", "err", err)
		return nil
	}
	return engine.WriteReport(ctx, s)
}

// runWriteup writes the paper of a run that just ended (run.yaml writeup:
// {enabled: true}). The search's outcome is the run's: a writeup that
// fails says so, and how to write it again.
func runWriteup(ctx context.Context, cfg *config.Scheduler, r paperRun) {
	fmt.Println("writeup: the paper of the run (run.yaml writeup.enabled)")
	var err error
	if r.facts, _, err = runFacts(ctx, cfg, r.s.Spec, r.info, r.s.Dir); err == nil {
		_, err = writePaper(ctx, cfg, r)
	}
	if err != nil {
		fmt.Fprintf(term.Stderr(), "writeup: %v (write it again: scheduler writeup --run-dir %s)\n", err, r.s.Dir)
	}
}

// endRun prints how the run ended and is what `scheduler run` returns:
// the run's error, ExitError(1) when no node produced the metric, or nil.
func endRun(spec run.Spec, runDir string, sum engine.Summary, runErr error) error {
	if sum.RunID == "" {
		return runErr
	}
	printSummary(spec, runDir, sum)
	if spec.Evaluation.Harness != nil {
		printEvaluation(spec, runDir)
	}
	if runErr != nil {
		return runErr
	}
	if !sum.HasBest {
		return exitError(1)
	}
	return nil
}

// runSpec is what a run starts from: a new run's idea, checked, its
// directory and run.json to be; or the spec and run.json of the run to
// resume, in the mode it ran in.
func runSpec(cfg *config.Scheduler, o RunOptions, mode string, log *slog.Logger) (spec run.Spec, info rundir.Info, runDir string, err error) {
	if o.Resume != "" {
		runDir = o.Resume
		switch info, err = rundir.Dir(runDir).ReadInfo(); {
		case err != nil:
			return spec, info, runDir, fmt.Errorf("%w: %s is not the directory of a `scheduler run`: %w", cli.ErrInvalidInput, runDir, err)
		case info.Command != "run":
			return spec, info, runDir, fmt.Errorf("%s is not the directory of a `scheduler run`: its run.json is of `scheduler %s`", runDir, info.Command)
		}
		if spec, err = runview.ReadSpec(runDir); err != nil {
			return spec, info, runDir, fmt.Errorf("it cannot be resumed: %w", err)
		}
		if memoryOverrides(cfg) != (run.MemoryOverrides{}) {
			log.Warn("the memory flags and HPCQ_MEMORY_* are ignored on --resume: a run keeps the memory settings it started with (spec.json)")
		}
		if info.Mode != mode {
			return spec, info, runDir, fmt.Errorf("run %s ran in %s mode; resume it in the same mode", info.RunID, info.Mode)
		}
		info.Resumes++
		return spec, info, runDir, nil
	}
	if spec, err = loadIdea(o.IdeaDir); err != nil {
		return spec, info, "", fmt.Errorf("%w: %w", cli.ErrInvalidInput, err)
	}
	if err := memoryOverrides(cfg).Apply(&spec); err != nil {
		return spec, info, "", fmt.Errorf("%w: %w", cli.ErrInvalidInput, err)
	}
	runDir = o.RunDir
	if runDir == "" {
		runDir = filepath.Join(cfg.RunsDir, dispatch.NewRunID())
	}
	if _, err := os.Stat(rundir.Dir(runDir).Path(rundir.InfoFile)); err == nil {
		return spec, info, runDir, fmt.Errorf("%s holds a run already: use --resume %s, or another --run-dir", runDir, runDir)
	}
	if err := schema.CheckToken("run id", filepath.Base(runDir), true); err != nil {
		return spec, info, runDir, fmt.Errorf("--run-dir %s: its name is the run id: %w", runDir, err)
	}
	abs, _ := filepath.Abs(o.IdeaDir)
	info = rundir.Info{RunID: filepath.Base(runDir), Command: "run", Mode: mode, IdeaDir: abs, Version: version.Version,
		Started: time.Now().UTC(), LocalWorkers: cfg.Workers, Slots: cfg.Slots}
	return spec, info, runDir, nil
}

// runDirGuard removes the directory of a new run whose start fails (NATS,
// Redis or ClickHouse unreachable, a bad endpoint): it would pass for the
// newest run.
type runDirGuard struct {
	dir              string
	created, started bool
	log              *slog.Logger
}

// claimRunDir makes the run's directory, noting whether this run created it.
func claimRunDir(dir string, isNew bool, log *slog.Logger) (*runDirGuard, error) {
	_, statErr := os.Stat(dir)
	g := &runDirGuard{dir: dir, created: isNew && errors.Is(statErr, os.ErrNotExist), log: log}
	return g, os.MkdirAll(dir, 0o755)
}

func (g *runDirGuard) release() {
	if g.created && !g.started {
		if err := os.RemoveAll(g.dir); err != nil {
			g.log.Warn("could not remove the directory of a run that did not start", "dir", g.dir, "err", err)
		}
	}
}

// runMemory opens the run's memory store (none when memory is off) and
// makes its directory; the map is run.json's account of it.
func runMemory(ctx context.Context, cfg *config.Scheduler, spec run.Spec, runDir string, log *slog.Logger) (memory.Store, map[string]string, func() error, error) {
	var store memory.Store
	info, closeFn := map[string]string{"enabled": "false"}, func() error { return nil }
	if *spec.Memory.Enabled {
		var err error
		if store, info, err = stores.OpenMemory(ctx, cfg.Store, rundir.Dir(runDir), spec.Memory.DBPath, spec.Memory.Config.HalfLife(), log); err != nil {
			return nil, nil, closeFn, err
		}
		closeFn = store.Close
	}
	if err := os.MkdirAll(rundir.Dir(runDir).Path(rundir.MemoryDir), 0o755); err != nil {
		_ = closeFn()
		return nil, nil, closeFn, err
	}
	return store, info, closeFn, nil
}

// memoryCallLog opens the memory call log the spec asks for
// (memory_log_enabled, memory_log_dir), or returns a nil writer.
func memoryCallLog(spec run.Spec, runDir string) (io.Writer, func() error, error) {
	if !run.On(spec.Memory.LogEnabled) {
		return nil, func() error { return nil }, nil
	}
	path := rundir.Dir(runDir).Path(rundir.MemoryCalls)
	if spec.Memory.LogDir != "" {
		if err := os.MkdirAll(spec.Memory.LogDir, 0o755); err != nil {
			return nil, nil, fmt.Errorf("memory.memory_log_dir: %w", err)
		}
		// A directory may be shared by runs.
		path = filepath.Join(spec.Memory.LogDir, filepath.Base(runDir)+"-"+filepath.Base(rundir.MemoryCalls))
	}
	w, err := linelog.Open(path, memory.CallLogFlush)
	if err != nil {
		return nil, nil, err
	}
	return w, w.Close, nil
}

// searchQueue is the run's queue: local mode's embedded server and workers
// (whose context ends the run if they fail), or the cluster's NATS. It
// returns the connection the LLM gateway serves on and the NATS URL
// run.json records.
func searchQueue(ctx context.Context, cfg *config.Scheduler, local bool, runDir, pool string, images []string, sink results.Sink, store memory.Store,
	log *slog.Logger) (*queue.Queue, *nats.Conn, context.Context, string, func(), error) {
	if local {
		l, lctx, closeLocal, err := startLocal(ctx, cfg, runDir, []string{pool}, images, sink, true, store, log)
		if err != nil {
			return nil, nil, ctx, "", nil, err
		}
		return l.Queue, l.Conn, lctx, "embedded", closeLocal, nil
	}
	conn, err := queue.Connect(ctx, cfg.NATS.Conn("hpcq-scheduler"), log)
	if err != nil {
		return nil, nil, ctx, "", nil, err
	}
	q, err := queue.New(ctx, conn, cfg.Queue.Options(), log)
	if err != nil {
		conn.Close()
		return nil, nil, ctx, "", nil, err
	}
	return q, conn, ctx, config.RedactURL(cfg.NATS.URL), func() { q.Close(); conn.Close() }, nil
}

// runObservers serves what the run's options ask: /metrics, the
// dashboard. Its metrics are nil when neither is asked; stop ends the
// dashboard and returns once it has (the run calls it before it closes
// what the dashboard reads).
func runObservers(ctx context.Context, cfg *config.Scheduler, o RunOptions, httpLn net.Listener, runDir string, store memory.Store,
	q *queue.Queue, log *slog.Logger) (met *metrics.Scheduler, stop func(), err error) {
	stop = func() {}
	if o.MetricsAddr == "" && o.HTTP == "" {
		return nil, stop, nil
	}
	reg := metrics.NewRegistry()
	met = metrics.NewScheduler(reg)
	queueCollector(reg, func(context.Context) (*queue.Queue, error) { return q, nil })
	if o.MetricsAddr != "" {
		if _, err := metrics.Serve(ctx, o.MetricsAddr, reg, log); err != nil {
			return nil, stop, err
		}
	}
	if o.HTTP != "" {
		addr, stopDashboard, err := serveRun(ctx, cfg, httpLn, runDir, store, q, reg, log)
		if err != nil {
			return nil, stop, err
		}
		stop = stopDashboard
		fmt.Printf("dashboard: http://%s/\n", addr)
	}
	return met, stop, nil
}

// ExportOptions are what `scheduler export` is asked.
type ExportOptions struct {
	RunDir string
	Log    *slog.Logger
}

// Export writes a finished (or interrupted) run's outputs again from its
// directory: tree.json, tree.html, report.md and the memory export.
func Export(ctx context.Context, cfg *config.Scheduler, o ExportOptions) error {
	log := o.Log
	var err error
	dir := o.RunDir
	if dir == "" {
		if dir, err = newestRun(cfg.RunsDir); err != nil {
			return err
		}
	}
	var spec run.Spec
	info, err := rundir.Dir(dir).ReadInfo()
	if err == nil && info.Command != "run" {
		err = fmt.Errorf("its run.json is of `scheduler %s`", info.Command)
	}
	if err != nil {
		return fmt.Errorf("%s is not the directory of a `scheduler run`: %w", dir, err)
	}
	if spec, err = runview.ReadSpec(dir); err != nil {
		return err
	}
	sp := session.Params{Spec: spec, RunDir: dir, Logger: log}
	st, err := stores.ReopenMemory(ctx, cfg.Store, rundir.Dir(dir), info.Memory, log)
	if err != nil {
		return err
	}
	if st != nil {
		defer logClose(log, "memory", st.Close)
		sp.MemoryStore = st
	}
	s, err := session.Open(sp)
	if err != nil {
		return err
	}
	defer s.Close()
	report, err := engine.Export(ctx, s)
	if err != nil {
		return err
	}
	fmt.Printf("report: %s\ntree:   %s, %s\n", report, filepath.Join(dir, "tree.json"), filepath.Join(dir, "tree.html"))
	if md, _ := spec.Memory.ExportNames(); s.Memory != nil && run.On(spec.Memory.FinalMemoryEnabled) {
		fmt.Printf("memory: %s\n", filepath.Join(dir, "memory", md))
	}
	return nil
}

// specImages are the images the run's specification names (its nodes'
// container image).
func specImages(spec run.Spec) []string {
	if spec.Container == nil {
		return nil
	}
	return ownImages(spec.Container.Image)
}
