package memory

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"
)

// Config holds the memory settings; the json names are the keys of the
// seed's `memory:` section. Every field has a default (Defaults).
type Config struct {
	CoreMaxChars    int `json:"core_max_chars" yaml:"core_max_chars"`
	RecallMaxEvents int `json:"recall_max_events" yaml:"recall_max_events"`
	RetrievalK      int `json:"retrieval_k" yaml:"retrieval_k"`
	// RedactSecrets defaults to on: nil means true, so a zero Config never
	// stores secrets.
	RedactSecrets            *bool `json:"redact_secrets" yaml:"redact_secrets"`
	MemoryBudgetChars        int   `json:"memory_budget_chars" yaml:"memory_budget_chars"`
	MaxCompressionIterations int   `json:"max_compression_iterations" yaml:"max_compression_iterations"`
	MaxMemoryReadRounds      int   `json:"max_memory_read_rounds" yaml:"max_memory_read_rounds"`
	// SectionBudgets by section name (the seed's section_budgets).
	SectionBudgets map[string]int `json:"section_budgets" yaml:"section_budgets"`
	// UseFTS is the seed's use_fts: auto (the default) or true. Archival
	// and recall search always run on hpcq's built-in full-text index
	// (BM25 over the branch's visible set), which needs no SQLite module,
	// so the seed's keyword fallback for a missing FTS5 has no case to
	// serve; false is refused by Validate rather than silently ignored.
	UseFTS string `json:"use_fts" yaml:"use_fts"`
	// LogMaxChars cuts what the call log (memory_calls.jsonl) keeps of
	// each operation's input and output (the seed's memory_log_max_chars).
	LogMaxChars int `json:"memory_log_max_chars" yaml:"memory_log_max_chars"`
	// Budgets of the evaluation prompts' sections (seed 001): the output
	// the execution review reads (metrics_extraction), the output the
	// metrics parser reads (parse_metrics), a node summary (node_summary);
	// the plot analysis: the commands that made the plots it reads
	// (plotting_code), the Plots section (plot_selection: names and SVG
	// sources), the analysis kept (vlm_analysis); the Resources section of
	// the prompts, with each resource's fetch status (datasets_tested).
	MetricsExtractionBudgetChars int `json:"metrics_extraction_budget_chars" yaml:"metrics_extraction_budget_chars"`
	ParseMetricsBudgetChars      int `json:"parse_metrics_budget_chars" yaml:"parse_metrics_budget_chars"`
	NodeSummaryBudgetChars       int `json:"node_summary_budget_chars" yaml:"node_summary_budget_chars"`
	PlottingCodeBudgetChars      int `json:"plotting_code_budget_chars" yaml:"plotting_code_budget_chars"`
	PlotSelectionBudgetChars     int `json:"plot_selection_budget_chars" yaml:"plot_selection_budget_chars"`
	VLMAnalysisBudgetChars       int `json:"vlm_analysis_budget_chars" yaml:"vlm_analysis_budget_chars"`
	DatasetsTestedBudgetChars    int `json:"datasets_tested_budget_chars" yaml:"datasets_tested_budget_chars"`
	// Seed 004's decay and consolidation. A fact's strength is its
	// confidence (1 - 0.5^repeats) times its decay (2^(-age/half-life));
	// it ranks archival hits, and hits weaker than ForgetBelow are left out
	// of searches and prompts (0: none). A sweep, every SweepIntervalS
	// seconds of the run (over the branches of the nodes that ended since)
	// and at its end, consolidates: recall events (episodes) of a branch
	// repeated ConsolidateMinEpisodes times or more become one semantic
	// archival fact, whose confidence counts the episodes.
	DecayHalfLifeHours     float64 `json:"decay_half_life_hours" yaml:"decay_half_life_hours"`
	ForgetBelow            float64 `json:"forget_below" yaml:"forget_below"`
	SweepIntervalS         int     `json:"sweep_interval_s" yaml:"sweep_interval_s"`
	ConsolidateMinEpisodes int     `json:"consolidate_min_episodes" yaml:"consolidate_min_episodes"`
}

// HalfLife is the decay half-life (default DefaultHalfLife).
func (c Config) HalfLife() time.Duration {
	if c.DecayHalfLifeHours <= 0 {
		return DefaultHalfLife
	}
	return time.Duration(c.DecayHalfLifeHours * float64(time.Hour))
}

// sectionBudgetKeys are the section_budgets keys hpcq knows.
var sectionBudgetKeys = map[string]bool{"idea_summary": true, "idea_section_limit": true, "phase0_summary": true, "archival_snippet": true, "results": true}

// Validate reports the first invalid setting, naming its key. Zero values
// are valid: they take the defaults.
func (c Config) Validate() error {
	for _, f := range []struct {
		key string
		v   int
	}{{"core_max_chars", c.CoreMaxChars}, {"recall_max_events", c.RecallMaxEvents}, {"retrieval_k", c.RetrievalK},
		{"memory_budget_chars", c.MemoryBudgetChars}, {"max_compression_iterations", c.MaxCompressionIterations},
		{"max_memory_read_rounds", c.MaxMemoryReadRounds}, {"memory_log_max_chars", c.LogMaxChars},
		{"metrics_extraction_budget_chars", c.MetricsExtractionBudgetChars}, {"parse_metrics_budget_chars", c.ParseMetricsBudgetChars},
		{"node_summary_budget_chars", c.NodeSummaryBudgetChars}, {"plotting_code_budget_chars", c.PlottingCodeBudgetChars},
		{"plot_selection_budget_chars", c.PlotSelectionBudgetChars}, {"vlm_analysis_budget_chars", c.VLMAnalysisBudgetChars},
		{"datasets_tested_budget_chars", c.DatasetsTestedBudgetChars}, {"sweep_interval_s", c.SweepIntervalS},
		{"consolidate_min_episodes", c.ConsolidateMinEpisodes}} {
		if f.v < 0 {
			return fmt.Errorf("memory config: %s is %d, must not be negative", f.key, f.v)
		}
	}
	if c.DecayHalfLifeHours < 0 {
		return fmt.Errorf("memory config: decay_half_life_hours is %g, must not be negative", c.DecayHalfLifeHours)
	}
	if c.ForgetBelow < 0 || c.ForgetBelow >= 1 {
		return fmt.Errorf("memory config: forget_below is %g, must be 0 (off) to below 1", c.ForgetBelow)
	}
	if c.ConsolidateMinEpisodes == 1 {
		return fmt.Errorf("memory config: consolidate_min_episodes is 1: a fact needs at least 2 episodes to be consolidated")
	}
	if least := MinSectionChars * len(sectionShares); c.MemoryBudgetChars > 0 && c.MemoryBudgetChars < least {
		return fmt.Errorf("memory config: memory_budget_chars is %d, must be at least %d (%d sections of %d)", c.MemoryBudgetChars, least, len(sectionShares), MinSectionChars)
	}
	keys := make([]string, 0, len(c.SectionBudgets))
	for k := range c.SectionBudgets {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !sectionBudgetKeys[k] {
			return fmt.Errorf("memory config: unknown section_budgets key %q (known: archival_snippet, idea_section_limit, idea_summary, phase0_summary, results)", k)
		}
		if c.SectionBudgets[k] < 0 {
			return fmt.Errorf("memory config: section_budgets.%s is %d, must not be negative", k, c.SectionBudgets[k])
		}
	}
	switch c.UseFTS {
	case "", "auto", "true":
	case "false":
		return errors.New("memory config: use_fts: false (the keyword fallback for a SQLite without FTS5) is not built: hpcq's full-text index is built in and always available; use auto or true")
	default:
		return fmt.Errorf("memory config: use_fts is %q, must be auto, true or false", c.UseFTS)
	}
	return nil
}

// Defaults are the seed's defaults.
func Defaults() Config {
	return Config{
		CoreMaxChars: 16000, RecallMaxEvents: 20, RetrievalK: 8, RedactSecrets: Bool(true),
		MemoryBudgetChars: 24000, MaxCompressionIterations: 3, MaxMemoryReadRounds: 2,
		SectionBudgets: map[string]int{"idea_summary": 9600, "idea_section_limit": 4800, "phase0_summary": 5000,
			"archival_snippet": 3000, "results": 4000},
		UseFTS: "auto", LogMaxChars: 1600,
		MetricsExtractionBudgetChars: 4000, ParseMetricsBudgetChars: 4000, NodeSummaryBudgetChars: 4000,
		PlottingCodeBudgetChars: 4000, PlotSelectionBudgetChars: 4000, VLMAnalysisBudgetChars: 4000, DatasetsTestedBudgetChars: 4000,
		DecayHalfLifeHours: 24, SweepIntervalS: 60, ConsolidateMinEpisodes: 2,
	}
}

// Bool returns a pointer to v, for Config.RedactSecrets.
func Bool(v bool) *bool { return &v }

// Summarizer folds an event that left the recall window into a branch's
// running summary (the LLM does it; tests use a double).
type Summarizer interface {
	Summarize(ctx context.Context, summary string, ev RecallEvent) (string, error)
}

// Options of a Memory.
type Options struct {
	// Summarizer folds events out of the window; without one, events leave
	// the window unsummarized.
	Summarizer Summarizer
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Calls receives one JSON line per memory operation
	// (memory_calls.jsonl), each in one Write; nil: not recorded.
	Calls io.Writer
	// Now is the clock of the call log. Defaults to time.Now.
	Now func() time.Time
	// Compressor shortens sections over budget; without one they are
	// truncated with a marker.
	Compressor Compressor
	// Observe, when set, is told every operation's name, duration and
	// error (the scheduler's metrics).
	Observe func(op string, d time.Duration, err error)
}

// Memory is the model on top of a Store: redaction, recall folding, the
// <memory_update> protocol and the call log.
type Memory struct {
	store Store
	cfg   Config
	opts  Options
	mu    sync.Mutex // serializes Calls writes
	cache compressCache
}

// New returns a Memory on store.
func New(store Store, cfg Config, opts Options) *Memory {
	d := Defaults()
	if cfg.CoreMaxChars <= 0 {
		cfg.CoreMaxChars = d.CoreMaxChars
	}
	if cfg.RecallMaxEvents <= 0 {
		cfg.RecallMaxEvents = d.RecallMaxEvents
	}
	if cfg.RetrievalK <= 0 {
		cfg.RetrievalK = d.RetrievalK
	}
	if cfg.MemoryBudgetChars <= 0 {
		cfg.MemoryBudgetChars = d.MemoryBudgetChars
	}
	if cfg.MaxCompressionIterations <= 0 {
		cfg.MaxCompressionIterations = d.MaxCompressionIterations
	}
	if cfg.MaxMemoryReadRounds <= 0 {
		cfg.MaxMemoryReadRounds = d.MaxMemoryReadRounds
	}
	if cfg.SectionBudgets == nil {
		cfg.SectionBudgets = d.SectionBudgets
	}
	if cfg.RedactSecrets == nil {
		cfg.RedactSecrets = d.RedactSecrets
	}
	if cfg.UseFTS == "" {
		cfg.UseFTS = d.UseFTS
	}
	if cfg.LogMaxChars <= 0 {
		cfg.LogMaxChars = d.LogMaxChars
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Memory{store: store, cfg: cfg, opts: opts}
}

// Store is the underlying store.
func (m *Memory) Store() Store { return m.store }

// Config is the configuration in effect.
func (m *Memory) Config() Config { return m.cfg }

func (m *Memory) redact(s string) string {
	if *m.cfg.RedactSecrets {
		return Redact(s)
	}
	return s
}

// CallLogFlush is how long a line of memory_calls.jsonl may wait to be
// written with others (internal/linelog): a scheduler killed loses at most
// that much of its call log, never part of a line. Each line its own
// write(2) was 2% of a 3,000-node run's CPU.
const CallLogFlush = 100 * time.Millisecond

// Fork creates the branch of a node.
func (m *Memory) Fork(ctx context.Context, branch, parent string) (Branch, error) {
	start := time.Now()
	b, err := m.store.Fork(ctx, ForkParams{Branch: branch, Parent: parent})
	m.record(branch, "fork", start, parent, "", 0, err)
	return b, err
}

// CoreSet writes a core key (redacted).
func (m *Memory) CoreSet(ctx context.Context, p CoreSetParams) (CoreEntry, error) {
	if why := keyChars(p.Key); why != "" {
		return CoreEntry{}, fmt.Errorf("%w: core key %q %s", ErrInvalid, p.Key, why)
	}
	start := time.Now()
	p.Value = m.redact(p.Value)
	e, err := m.store.CoreSet(ctx, p)
	m.record(p.Branch, "core_set", start, p.Key+": "+p.Value, "", 1, err)
	return e, err
}

// RecallList lists the branch's visible events (Store.RecallList).
func (m *Memory) RecallList(ctx context.Context, p RecallListParams) ([]RecallEvent, int, error) {
	start := time.Now()
	evs, total, err := m.store.RecallList(ctx, p)
	m.record(p.Branch, "recall_list", start, "", "", len(evs), err)
	return evs, total, err
}

// CoreGet reads a core key.
func (m *Memory) CoreGet(ctx context.Context, branch, key string) (CoreEntry, bool, error) {
	start := time.Now()
	e, ok, err := m.store.CoreGet(ctx, CoreKeyParams{Branch: branch, Key: key})
	m.record(branch, "core_get", start, key, e.Value, 0, err)
	return e, ok, err
}

// CoreDelete deletes a core key (a tombstone).
func (m *Memory) CoreDelete(ctx context.Context, branch, key string) error {
	start := time.Now()
	err := m.store.CoreDelete(ctx, CoreKeyParams{Branch: branch, Key: key})
	m.record(branch, "core_delete", start, key, "", 1, err)
	return err
}

// ArchivalWrite stores a text (redacted), or counts a repeat of it.
func (m *Memory) ArchivalWrite(ctx context.Context, p ArchivalWriteParams) (ArchivalItem, bool, error) {
	start := time.Now()
	p.Text = m.redact(p.Text)
	it, dup, err := m.store.ArchivalWrite(ctx, p)
	m.record(p.Branch, "archival_write", start, p.Text, "", 1, err)
	return it, dup, err
}

// ArchivalWrites stores texts of one branch as ArchivalWrite does each
// (redacted; a text whose fact the branch already sees counts a repeat),
// in one transaction: all or none. The call log has one archival_write
// line for them, its input the texts one per line and its items their
// count.
func (m *Memory) ArchivalWrites(ctx context.Context, branch string, ps []ArchivalWriteParams) error {
	if len(ps) == 0 {
		return nil
	}
	start := time.Now()
	p := ApplyParams{Branch: branch, Archival: make([]ArchivalWriteParams, len(ps))}
	var in strings.Builder
	for i, a := range ps {
		a.Branch, a.Text = branch, m.redact(a.Text)
		if i > 0 {
			in.WriteByte('\n')
		}
		in.WriteString(a.Text)
		p.Archival[i] = a
	}
	err := m.store.Apply(ctx, p)
	m.record(branch, "archival_write", start, in.String(), "", len(ps), err)
	return err
}

// ArchivalSearch ranks the branch's visible texts for query; k 0 means
// retrieval_k.
func (m *Memory) ArchivalSearch(ctx context.Context, p ArchivalSearchParams) ([]ArchivalItem, error) {
	start := time.Now()
	if p.K <= 0 {
		p.K = m.cfg.RetrievalK
	}
	hits, err := m.search(ctx, p)
	var out strings.Builder
	for _, h := range hits {
		out.WriteString(h.Text + "\n")
	}
	m.record(p.Branch, "archival_search", start, p.Query, out.String(), len(hits), err)
	return hits, err
}

// RecallSearch searches every visible event of the branch.
func (m *Memory) RecallSearch(ctx context.Context, p RecallSearchParams) ([]RecallEvent, error) {
	start := time.Now()
	hits, err := m.store.RecallSearch(ctx, p)
	m.record(p.Branch, "recall_search", start, p.Query, "", len(hits), err)
	return hits, err
}

// RecallAppend records an event (redacted), then folds the events that
// left the window into the branch's summary. A failing summarizer leaves
// the summary as it was (the event stays unfolded) and is logged.
func (m *Memory) RecallAppend(ctx context.Context, branch string, ev RecallEvent) (RecallEvent, error) {
	start := time.Now()
	ev.Payload = m.redact(ev.Payload)
	ev, err := m.store.RecallAppend(ctx, RecallAppendParams{Branch: branch, Event: ev})
	m.record(branch, "recall_append", start, ev.Kind+": "+ev.Payload, "", 1, err)
	if err != nil {
		return ev, err
	}
	return ev, m.fold(ctx, branch)
}

// fold moves events beyond the window into the summary, oldest first.
func (m *Memory) fold(ctx context.Context, branch string) error {
	if m.opts.Summarizer == nil {
		return nil
	}
	// Most appends leave the window holding every unfolded event: one read
	// (one round trip on the cluster store) says so.
	sum, unfolded, err := m.store.RecallUnfolded(ctx, branch, m.cfg.RecallMaxEvents+1)
	if err != nil {
		return err
	}
	if unfolded <= m.cfg.RecallMaxEvents {
		return nil
	}
	for {
		oldest, total, err := m.store.RecallList(ctx, RecallListParams{Branch: branch, AfterSeq: sum.FoldedSeq, Limit: 1, Total: true})
		if err != nil {
			return err
		}
		if total <= m.cfg.RecallMaxEvents || len(oldest) == 0 {
			return nil
		}
		start := time.Now()
		text, err := m.opts.Summarizer.Summarize(ctx, sum.Text, oldest[0])
		m.record(branch, "recall_summarize", start, oldest[0].Payload, text, 1, err)
		if err != nil {
			// The seed's fallback: on failure nothing changes.
			m.opts.Logger.Warn("recall summary not updated: the summarizer failed; the event stays out of the summary",
				"branch", branch, "seq", oldest[0].Seq, "err", err)
			return nil
		}
		sum = RecallSummary{Text: m.redact(text), FoldedSeq: oldest[0].Seq}
		if err := m.store.RecallSummarySet(ctx, RecallSummarySetParams{Branch: branch, Summary: sum}); err != nil {
			return err
		}
	}
}

// RecallWindow returns the branch's running summary and its last
// recall_max_events visible events.
func (m *Memory) RecallWindow(ctx context.Context, branch string) (RecallSummary, []RecallEvent, error) {
	v, err := ReadView(ctx, m.store, ViewParams{Branch: branch, Events: m.cfg.RecallMaxEvents})
	return v.Summary, v.Events, err
}

// ErrReadRounds: the replies kept asking for reads past
// max_memory_read_rounds.
var ErrReadRounds = errors.New("memory: too many <memory_update> read rounds")
