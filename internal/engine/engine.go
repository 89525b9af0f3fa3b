package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/hpcq/hpcq/internal/dispatch"
	"github.com/hpcq/hpcq/internal/run"
	"github.com/hpcq/hpcq/internal/search"
	"github.com/hpcq/hpcq/internal/session"
	"github.com/hpcq/hpcq/internal/tree"
	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// RootBranch is the memory branch of the run: the idea, the resources and
// the current stage; every draft forks from it.
const RootBranch = "root"

// Params configure Run: the queue and how the search shows itself. The
// run's directory, spec, model and memory are its session's (while a
// server of the memory is away the run holds the nodes it prepares and
// starts no new one; past session.Params.OutageMax it ends as interrupted,
// resumable).
type Params struct {
	Queue *queue.Queue
	// Results receives the runs row; the session's Rows the others.
	Results results.Sink
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
func Run(ctx context.Context, s *session.Session, p Params) (Summary, error) {
	if p.Queue == nil || p.Results == nil {
		return Summary{}, errors.New("engine: Params need Queue and Results")
	}
	if err := checkNotCanceled(ctx, s.Dir, p.Queue); err != nil {
		return Summary{}, err
	}
	e, err := newEngine(ctx, s, p)
	if err != nil {
		return Summary{}, err
	}
	defer e.close()
	return e.run(ctx)
}

type engine struct {
	// s is the run's session: its directory and spec, the metered client,
	// the memory, the prompt logs.
	s     *session.Session
	p     Params
	tree  *search.Tree
	cache *search.Cache
	disp  *dispatch.Dispatcher
	// files keeps the nodes' files last written or read.
	files *nodeFiles
	// harness is the idea's evaluator every node's task carries (nil:
	// none; docs/evaluation.md).
	harness *schema.Evaluate
	// texts keeps what the prompts say of each node once made.
	texts nodeTexts
	// own: node id -> ownNode, for the nodes this process made or ended.
	own sync.Map
	// published: node id -> struct{}, the nodes whose task is in the
	// queue now (the progress line tells them from those being written).
	published sync.Map
	// reg is the registry as the progress line last read it.
	reg registryView
	// imageTools are the toolchains the workers found in the run's image
	// (a node's result in it: nil until one came).
	imageTools atomic.Pointer[map[string]string]
	// cancel ends the run with a cause (an outage past its limit), and
	// outageStop says that one did.
	cancel     context.CancelCauseFunc
	outageStop atomic.Bool
	earlier    string // earlier runs of the idea, for Phase 0
	envMu      sync.Mutex
	env        environment
	slots      int
	sweeps     sweeps
	stage      atomic.Pointer[stageState] // read by the progress display
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

func newEngine(ctx context.Context, s *session.Session, p Params) (*engine, error) {
	for _, d := range []string{journalDir, nodesDir, memoryDir} {
		if err := os.MkdirAll(filepath.Join(s.Dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	e := &engine{s: s, p: p}
	e.files = &nodeFiles{dir: s.Dir, oldPlans: hasOldPlans(s.Dir), unwritten: e.isUnwritten}
	var err error
	if h := s.Spec.Evaluation.Harness; h != nil {
		if e.harness, err = h.SearchTask(); err != nil {
			return nil, err
		}
	}
	if e.tree, err = search.OpenTree(filepath.Join(s.Dir, rundir.TreeJournal)); err != nil {
		return nil, err
	}
	if e.cache, err = search.OpenCache(filepath.Join(s.Dir, journalDir, "cache.journal")); err != nil {
		e.close()
		return nil, err
	}
	if e.disp, err = dispatch.NewDispatcher(ctx, p.Queue, s.RunID); err != nil {
		e.close()
		return nil, err
	}
	s.OnConfigRefused(e.configRefused)
	return e, nil
}

// close closes what the engine opened (the session is its command's).
func (e *engine) close() {
	e.s.OnConfigRefused(nil)
	if e.disp != nil {
		e.disp.Close()
	}
	if e.cache != nil {
		_ = e.cache.Close()
	}
	if e.tree != nil {
		_ = e.tree.Close()
	}
}

func (e *engine) maximize() bool { return e.s.Spec.Metric.Direction == "maximize" }

func (e *engine) run(ctx context.Context) (Summary, error) {
	ctx, e.cancel = context.WithCancelCause(ctx)
	defer e.cancel(nil)
	started := time.Now()
	resumed := len(e.tree.Nodes()) > 0
	if err := rundir.WriteJSON(filepath.Join(e.s.Dir, rundir.SpecFile), e.s.Spec); err != nil {
		return Summary{}, err
	}
	cfg, _ := json.Marshal(e.s.Spec)
	runRow := results.Run{Run: e.s.RunID, Status: schema.RunRunning, Title: title(e.s.Spec), Mode: e.p.Mode, Config: string(cfg), TS: started}
	if err := e.p.Results.Write(ctx, results.Rows{Runs: []results.Run{runRow}}); err != nil {
		e.s.Log.Warn("runs row not written", "err", err)
	}
	var err error
	if e.env, err = e.environment(ctx, e.p.WaitWorkers); err != nil {
		return Summary{}, err
	}
	e.slots = e.stageSlots()
	if e.slots == defaultSlots && e.env.workers == 0 {
		e.s.Log.Warn("no live worker of the pool yet: the first nodes are published at once, 4 in flight (set search.slots in run.yaml)", "pool", e.s.Spec.Pool)
	}
	if err := e.setupMemory(ctx); err != nil {
		return Summary{}, err
	}
	e.earlier = earlierRuns(e.s.Dir, e.s.Spec)
	e.s.Log.Info("run started", "resumed", resumed, "slots", e.slots, "pool", e.s.Spec.Pool, "workers", e.env.workers, "memory", e.s.Memory != nil)

	if e.p.Gateway != nil {
		gctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			if err := llm.Serve(gctx, e.p.Gateway, e.s.Client, e.s.Log); err != nil {
				e.s.Log.Error("llm gateway", "err", err)
			}
		}()
	}
	if cancels, err := e.p.Queue.WatchCancels(ctx); err != nil {
		e.s.Log.Warn("cancels not watched: scheduler cancel cannot stop this run", "err", err)
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
	if note := e.declinedNote(context.WithoutCancel(ctx)); note != "" {
		// Said where the user looks: the run's last lines, report.md, the runs row.
		stoppedBy = strings.TrimPrefix(stoppedBy+"; "+note, "; ")
	}
	sum, err := e.finish(context.WithoutCancel(ctx), runRow, stoppedBy, notes)
	if err != nil {
		return sum, err
	}
	if e.canceled.Load() != nil {
		return sum, fmt.Errorf("run %s %s: %w", e.s.RunID, stoppedBy, ErrRunCanceled)
	}
	if ctx.Err() != nil {
		return sum, fmt.Errorf("run %s interrupted (resume with --resume %s): %w", e.s.RunID, e.s.Dir, context.Cause(ctx))
	}
	return sum, nil
}

// configRefused stops the run when the endpoint refuses its configuration
// (a key, a model, a parameter every request carries): no node could be
// written until it is fixed, so none is marked buggy for it; the nodes in
// flight stay unfinished and are prepared again on --resume.
func (e *engine) configRefused(err error) {
	e.s.Log.Error("the LLM endpoint refused the run's configuration: the run stops (fix it, then resume)", "err", err)
	if e.cancel != nil {
		e.cancel(err)
	}
}

// defaultSlots are the nodes in flight when neither the settings nor a
// live worker say how many.
const defaultSlots = 4

// title is the run's title: run.yaml's, else the idea's first line.
func title(spec run.Spec) string {
	if spec.Title != "" {
		return spec.Title
	}
	line, _, _ := strings.Cut(strings.TrimSpace(spec.Idea), "\n")
	return strings.TrimLeft(line, "# ")
}

// stageState is what the progress display shows of the stage running.
type stageState struct {
	n    int
	name string
}

// finish writes the outputs of the run and its final rows.
func (e *engine) finish(ctx context.Context, runRow results.Run, stoppedBy string, notes map[int]string) (Summary, error) {
	nodes := e.tree.Nodes()
	sum := Summary{RunID: e.s.RunID, Nodes: len(nodes), StoppedBy: stoppedBy, Usage: e.s.Client.Usage(), Report: filepath.Join(e.s.Dir, reportFile)}
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
	e.s.FlushUsage()
	end := rundir.End{Status: runRow.Status, StoppedBy: stoppedBy, Notes: notes}
	if c := e.canceled.Load(); c != nil {
		end.Canceled = c.Reason
		if end.Canceled == "" {
			end.Canceled = "scheduler cancel"
		}
	}
	if err := rundir.WriteJSON(filepath.Join(e.s.Dir, rundir.EndFile), end); err != nil {
		e.s.Log.Warn("end of run not saved", "err", err)
	}
	if e.s.Memory != nil {
		e.sweep(ctx, true)
	}
	out := outputs{s: e.s, tree: e.tree, files: e.files}
	if err := out.write(ctx, stoppedBy, notes); err != nil {
		return sum, err
	}
	if err := e.s.Rows.Flush(ctx); err != nil {
		e.s.Log.Warn("llm_calls rows not written before the run's end", "err", err)
	}
	if err := e.p.Results.Write(ctx, results.Rows{Runs: []results.Run{runRow}}); err != nil {
		e.s.Log.Warn("runs row not written", "err", err)
	}
	sum.Unflushed = e.flush(ctx, stoppedBy)
	return sum, nil
}

// endStatus is how the run ended (its runs row and end.json).
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
