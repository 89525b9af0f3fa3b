package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/hpcq/hpcq/internal/dispatch"
	"github.com/hpcq/hpcq/internal/metrics"
	"github.com/hpcq/hpcq/internal/prompt"
	"github.com/hpcq/hpcq/internal/run"
	"github.com/hpcq/hpcq/internal/runview"
	"github.com/hpcq/hpcq/internal/search"
	"github.com/hpcq/hpcq/internal/tree"
	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// RootBranch is the memory branch of the run: the idea, the resources and
// the current stage; every draft forks from it.
const RootBranch = "root"

// Params configure Run.
type Params struct {
	Spec run.Spec
	// RunDir is the run's directory; its base name is the run id. A
	// directory that holds a journal is resumed.
	RunDir string
	Queue  *queue.Queue
	// LLM is the scheduler's client; Run meters it (llm_calls, budget).
	LLM llm.Client
	// MemoryStore holds the run's memory; nil when memory is off.
	MemoryStore memory.Store
	// MemoryCalls receives memory_calls.jsonl.
	MemoryCalls io.Writer
	Results     results.Sink
	// WorkersWriteResults: the workers write the rows of their results
	// (phase_runs, metrics, nodes); otherwise Run writes them.
	WorkersWriteResults bool
	// Mode is "local" or "cluster", for the runs row.
	Mode string
	// Slots is how many nodes run at once; 0: search.slots of run.yaml,
	// else the slots of the pool's live workers.
	Slots int
	// WaitWorkers bounds the wait for a live worker of the pool at start
	// (0: none, the first nodes are published at once); without one the run
	// goes on (workers started on demand come when tasks wait) with slots
	// from run.yaml, else 4, until workers registered.
	WaitWorkers time.Duration
	// Status, on a terminal, shows the progress in place, redrawn every
	// second (internal/term.Screen); else Progress receives a progress line
	// every ProgressEvery [10s].
	Status        StatusLine
	Progress      io.Writer
	ProgressEvery time.Duration
	Logger        *slog.Logger
	// Metrics, when set, records nodes and LLM calls (run --metrics-addr).
	Metrics *metrics.Scheduler
	// OutageMax is how long the memory store may stay unreachable: while a
	// server is away the run holds the nodes it prepares and starts no new
	// one; past OutageMax it ends as interrupted (resumable) [10m].
	OutageMax time.Duration
	// Abandon, when it is closed (a second interrupt), ends the wait for
	// the writes still in the spools at the end of the run: they are left
	// there, and the summary says how they will be applied.
	Abandon <-chan struct{}
	// Gateway, when set, answers the workers' LLM requests (hpcq.llm.chat)
	// with the run's metered client while the run goes: workers need no
	// API key, and their calls count in llm_calls and the budget.
	Gateway *nats.Conn
}

// Summary is how a run ended.
type Summary struct {
	RunID     string
	Best      tree.Node
	HasBest   bool
	Nodes     int
	Buggy     int
	CacheHits int
	// StoppedBy says why the search stopped before its iterations ran out.
	StoppedBy string
	Usage     llm.Usage
	// Report is the path of report.md.
	Report string
	// Unflushed says which acknowledged writes (memory, results rows) were
	// not yet in their servers when the run ended, and how they will be.
	Unflushed []string
}

// Run grows the run's tree: for every stage, nodes are planned (Phase 0),
// written by the model, run as tasks on the queue and fed back into the
// memory, with as many nodes in flight as there are slots. Every node state
// change is journaled first, so a run killed at any point resumes from its
// directory: finished nodes are kept, a node whose task was published is
// answered from the results stream, the others are redone. A node that
// fails for any reason is buggy with the reason, and the run goes on. At
// the end it writes tree.json, tree.html, report.md and the memory export.
func Run(ctx context.Context, p Params) (Summary, error) {
	if err := checkNotCanceled(ctx, p.RunDir, p.Queue); err != nil {
		return Summary{}, err
	}
	e, err := newEngine(ctx, p, true)
	if err != nil {
		return Summary{}, err
	}
	defer e.close()
	return e.run(ctx)
}

// Export writes a run's outputs again from its directory (tree.json,
// tree.html, report.md, and with MemoryStore the memory export), without
// running anything: Params need Spec, RunDir and, for the memory export,
// MemoryStore. It reports what the last session of the run recorded about
// its end (early stop, stage notes).
func Export(ctx context.Context, p Params) (Summary, error) {
	e, err := newEngine(ctx, p, false)
	if err != nil {
		return Summary{}, err
	}
	defer e.close()
	end, _, err := rundir.Dir(e.dir).ReadEnd()
	if err != nil {
		return Summary{}, err
	}
	return e.finish(ctx, results.Run{}, end.StoppedBy, end.Notes)
}

type engine struct {
	// imageTools are the toolchains the workers found in the run's image
	// (a node's result in it: nil until one came).
	imageTools atomic.Pointer[map[string]string]
	p          Params
	spec       run.Spec
	log        *slog.Logger
	runID      string
	dir        string
	tree       *search.Tree
	cache      *search.Cache
	metered    *llm.Metered
	usage      *usageSaver
	// rows gathers the results rows: the llm_calls rows (Add, written every
	// callsEvery) and each node's (Write, which waits until they are stored).
	rows   *results.Batch
	client llm.Client
	mem    *memory.Memory
	outage *memory.OutageStore // the memory store, waiting out outages
	// summaries holds nodeSummary's line of each finished node, and
	// historyLines its historyLine.
	summaries, historyLines sync.Map
	// approaches: node id -> the first line of its plan's approach, kept
	// once read (a plan does not change after Phase 0).
	approaches sync.Map
	// own: node id -> ownNode, for the nodes this process made or ended.
	own sync.Map
	// published: node id -> struct{}, the nodes whose task is in the
	// queue now (the progress line tells them from those being written).
	published sync.Map
	// reg is the registry as the progress line last read it.
	reg registryView
	// tasks and outcomes keep the files of the nodes last written or read.
	tasks    recent[schema.NodeTask]
	outcomes recent[rundir.Outcome]
	// oldPlans: the run was written when Phase 0's files were in plans/<id>/.
	oldPlans bool
	// cancel ends the run with a cause (an outage past its limit), and
	// outageStop says that one did.
	cancel     context.CancelCauseFunc
	outageStop atomic.Bool
	disp       *dispatch.Dispatcher
	logs       *prompt.Logs
	earlier    string // earlier runs of the idea, for Phase 0
	envMu      sync.Mutex
	env        environment
	slots      int
	// sweep: the branches of the nodes that ended since the last memory
	// sweep, and when it ran.
	sweepMu      sync.Mutex
	sweepPending []string
	lastSweep    time.Time
	stage        atomic.Pointer[stageState] // read by the progress display
	// canceled is set when the run was canceled; cancels, under cancelMu,
	// are its nodes' cancels.
	canceled atomic.Pointer[queue.Cancel]
	cancelMu sync.Mutex
	cancels  cancels
}

// Directories of a run, under its RunDir.
const (
	journalDir = rundir.JournalDir
	nodesDir   = rundir.NodesDir
	memoryDir  = rundir.MemoryDir
)

func newEngine(ctx context.Context, p Params, live bool) (*engine, error) {
	if p.RunDir == "" || live && (p.Queue == nil || p.LLM == nil || p.Results == nil) {
		return nil, errors.New("experiment: Params need RunDir, Queue, LLM and Results")
	}
	if err := p.Spec.Validate(); err != nil {
		return nil, err
	}
	log := p.Logger
	if log == nil {
		log = slog.Default()
	}
	dir, err := filepath.Abs(p.RunDir)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{journalDir, nodesDir, memoryDir} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	e := &engine{p: p, spec: p.Spec, runID: filepath.Base(dir), dir: dir, oldPlans: hasOldPlans(dir)}
	e.log = log.With("run_id", e.runID)
	if e.tree, err = search.OpenTree(filepath.Join(dir, rundir.TreeJournal)); err != nil {
		return nil, err
	}
	if e.cache, err = search.OpenCache(filepath.Join(dir, journalDir, "cache.journal")); err != nil {
		e.close()
		return nil, err
	}
	l := p.Spec.LLM
	e.metered = &llm.Metered{Client: llm.Defaults{Client: p.LLM, Model: l.Model, Temperature: l.Temperature, MaxTokens: l.MaxTokens,
		ReasoningEffort: l.ReasoningEffort},
		Record: e.recordCall, Run: e.runID, Prices: l.Prices, Budget: l.Budget, Logger: e.log, OnConfigError: e.configRefused}
	if u, err := runview.ReadUsage(dir); err != nil {
		e.close()
		return nil, err
	} else {
		e.metered.Restore(u)
	}
	e.client = e.metered
	if p.Results != nil {
		e.rows = results.NewBatch(p.Results, callsEvery, e.log)
	}
	e.usage = &usageSaver{path: filepath.Join(dir, rundir.UsageFile), usage: e.metered.Usage, log: e.log}
	if p.MemoryStore != nil && *p.Spec.Memory.Enabled {
		e.outage = memory.NewOutageStore(p.MemoryStore, memory.OutageOptions{Max: p.OutageMax, Logger: e.log})
		e.mem = memory.New(e.outage, p.Spec.Memory.Config, memory.Options{
			Summarizer: prompt.Summarizer{Client: e.metered},
			Compressor: compressor(p.Spec.Memory, e.metered),
			Logger:     e.log, Calls: p.MemoryCalls, Observe: p.Metrics.MemoryOp,
		})
	}
	if *p.Spec.LogPrompts {
		e.logs = &prompt.Logs{Dir: dir}
	}
	if !live {
		return e, nil
	}
	if e.disp, err = dispatch.NewDispatcher(ctx, p.Queue, e.runID); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

// callsEvery is how often the llm_calls rows gathered are written: a
// transaction per call cost as much of the scheduler's CPU as the call's
// HTTP exchange (7% at 3,000 nodes of the benchmark); a crash loses at
// most this much of them (usage.json, what the budget counts on a resume,
// is written apart).
const callsEvery = 100 * time.Millisecond

// recordCall queues an LLM call's llm_calls row.
func (e *engine) recordCall(_ context.Context, c llm.Call) {
	e.p.Metrics.Call(c.Purpose, c.Model, c.TokensIn, c.TokensOut, c.TokensReasoning, c.CostUSD, c.Latency, c.Error != "")
	if e.rows == nil {
		return
	}
	e.rows.Add(results.Rows{LLMCalls: []results.LLMCall{{Run: c.Run, Node: c.Node, Purpose: c.Purpose, Model: c.Model,
		TokensIn: c.TokensIn, TokensOut: c.TokensOut, ReasoningTokens: c.TokensReasoning, CachedTokens: c.TokensCached,
		TokensEstimated: c.TokensEstimated, LatencyMS: float64(c.Latency.Microseconds()) / 1000, CostUSD: c.CostUSD,
		CacheHit: c.CacheHit, Error: c.Error, TS: c.Started}}})
}

func (e *engine) close() {
	if e.usage != nil {
		e.usage.flush() // nothing written after the engine
	}
	if e.rows != nil {
		_ = e.rows.Close() // a failure is logged
	}
	if e.disp != nil {
		e.disp.Close()
	}
	if e.cache != nil {
		_ = e.cache.Close()
	}
	if e.tree != nil {
		_ = e.tree.Close()
	}
	if e.logs != nil {
		if err := e.logs.Close(); err != nil {
			e.log.Warn("prompt logs not closed", "err", err)
		}
	}
}

func (e *engine) maximize() bool { return e.spec.Metric.Direction == "maximize" }

func (e *engine) run(ctx context.Context) (Summary, error) {
	ctx, e.cancel = context.WithCancelCause(ctx)
	defer e.cancel(nil)
	started := time.Now()
	resumed := len(e.tree.Nodes()) > 0
	if err := rundir.WriteJSON(filepath.Join(e.dir, rundir.SpecFile), e.spec); err != nil {
		return Summary{}, err
	}
	cfg, _ := json.Marshal(e.spec)
	runRow := results.Run{Run: e.runID, Status: schema.RunRunning, Title: e.title(), Mode: e.p.Mode, Config: string(cfg), TS: started}
	if err := e.p.Results.Write(ctx, results.Rows{Runs: []results.Run{runRow}}); err != nil {
		e.log.Warn("runs row not written", "err", err)
	}
	var err error
	if e.env, err = e.environment(ctx, e.p.WaitWorkers); err != nil {
		return Summary{}, err
	}
	e.slots = e.stageSlots()
	if e.slots == defaultSlots && e.env.workers == 0 {
		e.log.Warn("no live worker of the pool yet: the first nodes are published at once, 4 in flight (set search.slots in run.yaml)", "pool", e.spec.Pool)
	}
	if err := e.setupMemory(ctx); err != nil {
		return Summary{}, err
	}
	e.earlier = earlierRuns(e.dir, e.spec)
	e.log.Info("run started", "resumed", resumed, "slots", e.slots, "pool", e.spec.Pool, "workers", e.env.workers, "memory", e.mem != nil)

	if e.p.Gateway != nil {
		gctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			if err := llm.Serve(gctx, e.p.Gateway, e.metered, e.log); err != nil {
				e.log.Error("llm gateway", "err", err)
			}
		}()
	}
	if cancels, err := e.p.Queue.WatchCancels(ctx); err != nil {
		e.log.Warn("cancels not watched: scheduler cancel cannot stop this run", "err", err)
	} else {
		go e.watchCancels(cancels)
	}
	stopProgress := e.startProgress(ctx)
	stoppedBy, notes := e.stages(ctx)
	stopProgress()

	if c := e.canceled.Load(); c != nil {
		stoppedBy = "canceled"
		if c.Reason != "" {
			stoppedBy += ": " + c.Reason
		}
		e.endInFlight(context.WithoutCancel(ctx), c.Reason)
	} else if ctx.Err() != nil && stoppedBy == "" {
		stoppedBy = "interrupted: " + context.Cause(ctx).Error()
	}
	sum, err := e.finish(context.WithoutCancel(ctx), runRow, stoppedBy, notes)
	if err != nil {
		return sum, err
	}
	if e.canceled.Load() != nil {
		return sum, fmt.Errorf("run %s %s: %w", e.runID, stoppedBy, ErrRunCanceled)
	}
	if ctx.Err() != nil {
		return sum, fmt.Errorf("run %s interrupted (resume with --resume %s): %w", e.runID, e.dir, context.Cause(ctx))
	}
	return sum, nil
}

// configRefused stops the run when the endpoint refuses its configuration
// (a key, a model, a parameter every request carries): no node could be
// written until it is fixed, so none is marked buggy for it; the nodes in
// flight stay unfinished and are prepared again on --resume.
func (e *engine) configRefused(err error) {
	e.log.Error("the LLM endpoint refused the run's configuration: the run stops (fix it, then resume)", "err", err)
	if e.cancel != nil {
		e.cancel(err)
	}
}

// defaultSlots are the nodes in flight when neither the settings nor a
// live worker say how many.
const defaultSlots = 4

func (e *engine) title() string {
	if e.spec.Title != "" {
		return e.spec.Title
	}
	line, _, _ := strings.Cut(strings.TrimSpace(e.spec.Idea), "\n")
	return strings.TrimLeft(line, "# ")
}

// stageState is what the progress display shows of the stage running.
type stageState struct {
	n    int
	name string
}

// finish writes the outputs of the run and its final rows.
func (e *engine) finish(ctx context.Context, runRow results.Run, stoppedBy string, notes map[int]string) (Summary, error) {
	u := e.metered.Usage()
	nodes := e.tree.Nodes()
	sum := Summary{RunID: e.runID, Nodes: len(nodes), StoppedBy: stoppedBy, Usage: u, Report: filepath.Join(e.dir, "report.md")}
	for _, n := range nodes {
		if n.Buggy {
			sum.Buggy++
		}
		if e.endedFromCache(n.ID) {
			sum.CacheHits++
		}
	}
	sum.Best, sum.HasBest = e.tree.Best(e.maximize())
	runRow.Status, runRow.TS = e.endStatus(stoppedBy, sum.HasBest), time.Now()
	if e.disp != nil {
		e.usage.flush()
		end := rundir.End{Status: runRow.Status, StoppedBy: stoppedBy, Notes: notes}
		if c := e.canceled.Load(); c != nil {
			end.Canceled = c.Reason
			if end.Canceled == "" {
				end.Canceled = "scheduler cancel"
			}
		}
		if err := rundir.WriteJSON(filepath.Join(e.dir, rundir.EndFile), end); err != nil {
			e.log.Warn("end of run not saved", "err", err)
		}
	}
	if err := search.WriteTreeJSON(filepath.Join(e.dir, "tree.json"), e.tree, e.maximize()); err != nil {
		return sum, err
	}
	rp := e.reportParams(stoppedBy, notes)
	if err := e.writeReport(rp); err != nil {
		return sum, err
	}
	var html strings.Builder
	if err := search.WriteTreeHTML(&html, e.tree, rp); err != nil {
		return sum, err
	}
	if err := os.WriteFile(filepath.Join(e.dir, "tree.html"), []byte(html.String()), 0o644); err != nil {
		return sum, err
	}
	if e.mem != nil {
		e.sweep(ctx, true)
	}
	if e.mem != nil && run.On(e.spec.Memory.FinalMemoryEnabled) {
		best := RootBranch
		if sum.HasBest {
			best = sum.Best.ID
		}
		md, js := e.spec.Memory.ExportNames()
		if _, err := e.mem.Export(ctx, memory.ExportParams{Root: RootBranch, Best: best, Dir: filepath.Join(e.dir, memoryDir), Markdown: md, JSON: js}); err != nil {
			e.log.Warn("memory export failed", "err", err)
		}
	}
	if e.p.Results == nil || runRow.Run == "" {
		return sum, nil // an export: the runs row is the run's own
	}
	if err := e.rows.Flush(ctx); err != nil {
		e.log.Warn("llm_calls rows not written before the run's end", "err", err)
	}
	if err := e.p.Results.Write(ctx, results.Rows{Runs: []results.Run{runRow}}); err != nil {
		e.log.Warn("runs row not written", "err", err)
	}
	sum.Unflushed = e.flush(ctx, stoppedBy)
	return sum, nil
}

// endStatus is how the run ended (its runs row and end.json).
// reportParams are what report.md and tree.html say beside the tree: the
// usage so far, how the search stopped, the best node's detail, the paper.
func (e *engine) reportParams(stoppedBy string, notes map[int]string) search.ReportParams {
	u := e.metered.Usage()
	rp := search.ReportParams{Title: e.title(), MetricName: e.spec.Metric.Name, Unit: e.spec.Metric.Unit, Maximize: e.maximize(),
		Calls: u.Calls, TokensIn: u.TokensIn, TokensOut: u.TokensOut, CostUSD: u.CostUSD, StoppedBy: stoppedBy, StageNotes: notes,
		Paper: e.paperSection()}
	if best, ok := e.tree.Best(e.maximize()); ok {
		rp.BestDetail = e.bestDetail(best.ID)
	}
	return rp
}

// writeReport writes report.md.
func (e *engine) writeReport(rp search.ReportParams) error {
	var rep strings.Builder
	if err := search.WriteReport(&rep, e.tree, rp); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(e.dir, "report.md"), []byte(rep.String()), 0o644)
}

func (e *engine) endStatus(stoppedBy string, hasBest bool) string {
	switch {
	case e.canceled.Load() != nil:
		return schema.RunCanceled
	case ctxDone(stoppedBy):
		return schema.RunInterrupted
	case stoppedBy != "":
		return schema.RunStopped
	case !hasBest:
		return schema.RunFailed
	}
	return schema.RunDone
}

func ctxDone(stoppedBy string) bool { return strings.HasPrefix(stoppedBy, "interrupted") }
