// Package session is a run's session with its model and its memory: the
// metered client (prices, budget, the llm_calls rows, usage.json), the
// memory with its outage wrapper, the prompt logs, and the sections of a
// prompt brought within their budgets. The command that runs a search or
// writes a paper opens one; the engine and the writeup take it, so that
// their calls count against one budget and are recorded once.
package session

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/hpcq/hpcq/internal/metrics"
	"github.com/hpcq/hpcq/internal/prompt"
	"github.com/hpcq/hpcq/internal/run"
	"github.com/hpcq/hpcq/internal/runview"
	"github.com/hpcq/hpcq/internal/textcut"
	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// Params configure Open.
type Params struct {
	Spec run.Spec
	// RunDir is the run's directory; its base name is the run id.
	RunDir string
	// LLM is the scheduler's client; the session meters it.
	LLM llm.Client
	// MemoryStore holds the run's memory; nil when memory is off.
	MemoryStore memory.Store
	// MemoryCalls receives memory_calls.jsonl.
	MemoryCalls io.Writer
	// Results receives the llm_calls rows (and the engine's node rows
	// through Rows); nil: none are written.
	Results results.Sink
	// OutageMax is how long the memory store may stay unreachable [10m]
	// (memory.OutageOptions).
	OutageMax time.Duration
	// Metrics, when set, records LLM calls and memory operations.
	Metrics *metrics.Scheduler
	Logger  *slog.Logger
}

// Session is one command's use of a run's model and memory.
type Session struct {
	Spec  run.Spec
	RunID string
	// Dir is the run's directory, absolute.
	Dir string
	Log *slog.Logger
	// Client is the run's metered client: every call counts in usage.json
	// and the budget and is a row of llm_calls.
	Client *llm.Metered
	// Memory is the run's memory (nil when off), over Store: the memory
	// store, waiting out its outages.
	Memory *memory.Memory
	Store  *memory.OutageStore
	// Logs keeps every prompt and reply of a node (log_prompts; nil: off).
	Logs *prompt.Logs
	// Rows gathers the results rows: the llm_calls rows (written every
	// callsEvery) and the engine's node rows (Write waits until they are
	// stored); nil without Params.Results.
	Rows    *results.Batch
	Metrics *metrics.Scheduler
	// OutageMax is how long the memory store may stay unreachable [10m].
	OutageMax time.Duration
	// MemoryStore is the memory's store as given (its spool flushed at the
	// run's end); nil when memory is off.
	MemoryStore memory.Store

	usage   *usageSaver
	refused atomic.Pointer[func(error)]
}

// callsEvery is how often the llm_calls rows gathered are written: a
// transaction per call cost as much of the scheduler's CPU as the call's
// HTTP exchange (7% at 3,000 nodes of the benchmark); a crash loses at
// most this much of them (usage.json, what the budget counts on a resume,
// is written apart).
const callsEvery = 100 * time.Millisecond

// Open opens the session of the run in p.RunDir: its usage so far (a
// resumed run's budget counts what it spent), its memory, its prompt logs.
func Open(p Params) (*Session, error) {
	if p.RunDir == "" {
		return nil, errors.New("session: Params need RunDir")
	}
	if err := p.Spec.Validate(); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(p.RunDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, rundir.JournalDir), 0o755); err != nil {
		return nil, err
	}
	log := p.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Session{Spec: p.Spec, RunID: filepath.Base(dir), Dir: dir, Metrics: p.Metrics, OutageMax: cmp.Or(p.OutageMax, 10*time.Minute)}
	s.Log = log.With("run_id", s.RunID)
	u, err := runview.ReadUsage(dir)
	if err != nil {
		return nil, err
	}
	l := p.Spec.LLM
	s.Client = &llm.Metered{Client: llm.Defaults{Client: p.LLM, Model: l.Model, Temperature: l.Temperature, MaxTokens: l.MaxTokens,
		ReasoningEffort: l.ReasoningEffort},
		Record: s.recordCall, Run: s.RunID, Prices: l.Prices, Budget: l.Budget, Logger: s.Log, OnConfigError: s.configRefused}
	s.Client.Restore(u)
	if p.Results != nil {
		s.Rows = results.NewBatch(p.Results, callsEvery, s.Log)
	}
	s.usage = &usageSaver{path: filepath.Join(dir, rundir.UsageFile), usage: s.Client.Usage, log: s.Log}
	if p.MemoryStore != nil && *p.Spec.Memory.Enabled {
		s.MemoryStore = p.MemoryStore
		s.Store = memory.NewOutageStore(p.MemoryStore, memory.OutageOptions{Max: p.OutageMax, Logger: s.Log})
		s.Memory = memory.New(s.Store, p.Spec.Memory.Config, memory.Options{
			Summarizer: prompt.Summarizer{Client: s.Client},
			Compressor: compressor(p.Spec.Memory, s.Client),
			Logger:     s.Log, Calls: p.MemoryCalls, Observe: p.Metrics.MemoryOp,
		})
	}
	if *p.Spec.LogPrompts {
		s.Logs = &prompt.Logs{Dir: dir}
	}
	return s, nil
}

// Close writes the usage and the rows still gathered, and closes the
// prompt logs: nothing is written after it.
func (s *Session) Close() {
	s.usage.flush()
	if s.Rows != nil {
		_ = s.Rows.Close() // a failure is logged
	}
	if s.Logs != nil {
		if err := s.Logs.Close(); err != nil {
			s.Log.Warn("prompt logs not closed", "err", err)
		}
	}
}

// SaveUsage saves the usage in usage.json soon (at most once a second).
func (s *Session) SaveUsage() { s.usage.save() }

// FlushUsage saves the usage now.
func (s *Session) FlushUsage() { s.usage.flush() }

// OnConfigRefused sets what happens when the endpoint refuses the run's
// configuration (a key, a model, a parameter every request carries): the
// engine stops the run. nil: the refusal is logged.
func (s *Session) OnConfigRefused(f func(error)) {
	if f == nil {
		s.refused.Store(nil)
		return
	}
	s.refused.Store(&f)
}

func (s *Session) configRefused(err error) {
	if f := s.refused.Load(); f != nil {
		(*f)(err)
		return
	}
	s.Log.Error("the LLM endpoint refused the run's configuration", "err", err)
}

// recordCall queues an LLM call's llm_calls row.
func (s *Session) recordCall(_ context.Context, c llm.Call) {
	s.Metrics.Call(c.Purpose, c.Model, c.TokensIn, c.TokensOut, c.TokensReasoning, c.CostUSD, c.Latency, c.Error != "")
	if s.Rows == nil {
		return
	}
	s.Rows.Add(results.Rows{LLMCalls: []results.LLMCall{{Run: c.Run, Node: c.Node, Purpose: c.Purpose, Model: c.Model,
		TokensIn: c.TokensIn, TokensOut: c.TokensOut, ReasoningTokens: c.TokensReasoning, CachedTokens: c.TokensCached,
		TokensEstimated: c.TokensEstimated, LatencyMS: float64(c.Latency.Microseconds()) / 1000, CostUSD: c.CostUSD,
		CacheHit: c.CacheHit, Error: c.Error, TS: c.Started, FinishReason: c.FinishReason, Unpriced: c.Unpriced}}})
}

// compressor is the memory's compressor: the model (compression_model,
// default the run's), or none when use_llm_compression is off: sections
// over budget are then cut, with a marker.
func compressor(m run.Memory, client llm.Client) memory.Compressor {
	if !run.On(m.UseLLMCompression) {
		return nil
	}
	return prompt.Compressor{Client: client, Model: m.CompressionModel}
}

// Section brings text within the budget of a prompt's section (the seed's
// section_budgets: key): as it is, compressed by the memory's model, or
// cut with a marker when the run has no memory or compression is off.
func (s *Session) Section(ctx context.Context, text, key, hint string) string {
	budget := s.Spec.Memory.SectionBudgets[key]
	if budget <= 0 {
		budget = memory.Defaults().SectionBudgets[key]
	}
	if budget <= 0 || len(text) <= budget {
		return text
	}
	if s.Memory != nil {
		return s.Memory.Shorten(ctx, text, budget, hint)
	}
	return textcut.Marked(text, budget)
}

// IdeaSection is the Research idea section of the prompts: the idea within
// section_budgets.idea_section_limit.
func (s *Session) IdeaSection(ctx context.Context) string {
	return s.Section(ctx, s.Spec.Idea, "idea_section_limit", "the research idea, for the prompt's Research idea section")
}
