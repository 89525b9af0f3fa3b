package schedcmd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/hpcq/hpcq/internal/cli"
	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/hostbound"
	"github.com/hpcq/hpcq/internal/run"
	"github.com/hpcq/hpcq/internal/stores"
	"github.com/hpcq/hpcq/internal/term"
	"github.com/hpcq/hpcq/internal/textcut"
	"github.com/hpcq/hpcq/internal/writeup"
	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// memoryOverrides are the memory settings of the environment and the
// seed's flags (config.Memory), for run.MemoryOverrides.Apply.
func memoryOverrides(cfg *config.Scheduler) run.MemoryOverrides {
	m := cfg.Memory
	return run.MemoryOverrides{Enabled: m.MemoryEnabled, DB: m.MemoryDB, CoreMaxChars: m.MemoryCoreMax, RecallMaxEvents: m.MemoryRecall,
		RetrievalK: m.MemoryK, MaxCompressionIterations: m.MemoryCompress}
}

// CheckOptions are what `scheduler check` is asked.
type CheckOptions struct {
	IdeaDir string
	Out     io.Writer
	// Probe sends one tiny request (and with vision, one tiny image) to
	// the endpoint and prints what it accepted.
	Probe bool
}

// Check is `scheduler check IDEA_DIR`: it reads and validates the idea
// directory with the environment and flags applied as `run` would, and
// prints the resolved settings and where the run would keep its memory and
// results and which model would answer, and what is sent to it. It starts
// nothing; with Probe it asks the endpoint once (an error when it
// refuses). An invalid setting is cli.ErrInvalidInput naming the key.
//
// Long: it prints the resolved settings in the order a user reads them, one
// short block per setting.
func Check(ctx context.Context, cfg *config.Scheduler, o CheckOptions) error {
	if o.Out == nil {
		o.Out = term.Stdout()
	}
	spec, err := loadIdea(o.IdeaDir)
	if err == nil {
		err = memoryOverrides(cfg).Apply(&spec)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", cli.ErrInvalidInput, err)
	}
	llmConf, llmInfo, llmErr := llmChoice(spec, o.IdeaDir)
	if llmErr == nil && llmConf.Model != "" {
		spec.LLM.Model = llmConf.Model // HPCQ_LLM_MODEL, as run applies it
	}
	shown := spec
	shown.Idea = fmt.Sprintf("(%d characters; first line: %s)", len(spec.Idea), textcut.FirstLine(spec.Idea, 0))
	data, err := yaml.Marshal(shown)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "%s: valid\n\n# resolved settings (run.yaml, then HPCQ_MEMORY_*, then the flags)\n%s\n", o.IdeaDir, data)
	memory := "off"
	switch {
	case !*spec.Memory.Enabled:
	case cfg.Store.RedisURL != "" && cfg.Store.ClickHouseDSN != "":
		memory = fmt.Sprintf("cluster: Redis %s, ClickHouse %s", config.RedactURL(cfg.Store.RedisURL), config.RedactURL(cfg.Store.ClickHouseDSN))
	case spec.Memory.DBPath != "":
		memory = "SQLite " + spec.Memory.DBPath
	default:
		memory = "SQLite RUN_DIR/" + rundir.MemoryDB
	}
	results := "SQLite RUN_DIR/" + rundir.ResultsFile
	if cfg.Store.ClickHouseDSN != "" {
		results = "ClickHouse " + config.RedactURL(cfg.Store.ClickHouseDSN)
	}
	model := ""
	switch {
	case llmErr != nil:
		model = "none: " + llmErr.Error()
	case llmInfo["backend"] == "openai":
		model = fmt.Sprintf("%s at %s", llmInfo["model"], llmInfo["base_url"])
		if llmInfo["base_url"] == "" {
			model = llmInfo["model"] + " (OpenAI)"
		}
	case llmInfo["scripted"] != "":
		model = "the scripted replies of " + llmInfo["cassette"] + " (no model configured)"
	default:
		model = "replay of " + llmInfo["cassette"]
	}
	metric, err := metricLine(spec)
	if err != nil {
		return fmt.Errorf("%w: %w", cli.ErrInvalidInput, err)
	}
	fmt.Fprintf(o.Out, "memory:  %s\nresults: %s\nmodel:   %s\npaper:   %s\nmetric:  %s\nbound:   %s\n", memory, results, model, paperLine(spec, o.IdeaDir),
		metric, boundLine(spec))
	if llmErr != nil || llmInfo["backend"] != "openai" {
		if o.Probe {
			return fmt.Errorf("--probe: no endpoint to probe (model: %s)", model)
		}
		return nil
	}
	p, err := stores.LLMProfile(llmConf, runSettings(spec))
	if err != nil {
		return fmt.Errorf("%w: %w", cli.ErrInvalidInput, err)
	}
	fmt.Fprintf(o.Out, "sends:   %s\n", p)
	fmt.Fprintf(o.Out, "limits:  %s %d", p.TokenField, spec.LLM.MaxTokens)
	if p.Reasoning {
		capTokens := spec.LLM.MaxTokensCap
		if capTokens == 0 {
			capTokens = 4 * spec.LLM.MaxTokens
		}
		effort := spec.LLM.ReasoningEffort
		if effort == "" {
			effort = "the endpoint's default"
		}
		fmt.Fprintf(o.Out, " (up to %d when a reply is cut by reasoning), reasoning_effort %s", capTokens, effort)
		if t := spec.LLM.Temperature; t != nil {
			fmt.Fprintf(o.Out, "; llm.temperature %g is not sent", *t)
		}
	} else if t := spec.LLM.Temperature; t != nil {
		fmt.Fprintf(o.Out, ", temperature %g", *t)
	}
	fmt.Fprintf(o.Out, "; each attempt capped at %s", llmConf.Timeout)
	if p.Stream {
		fmt.Fprintf(o.Out, ", %s between chunks", llmConf.IdleTimeout)
	}
	fmt.Fprintln(o.Out)
	fmt.Fprintf(o.Out, "prices:  %s\n", spec.PriceLine(llmConf.Model, llmConf.Serves))
	if err := spec.CheckBudgetPriced(llmConf.Model, llmConf.Serves); err != nil {
		return fmt.Errorf("%w: %w", cli.ErrInvalidInput, err)
	}
	if !o.Probe {
		return nil
	}
	opts, err := stores.LLMOptions(llmConf, runSettings(spec))
	if err != nil {
		return fmt.Errorf("%w: %w", cli.ErrInvalidInput, err)
	}
	opts.MaxAttempts = 1
	client, err := llm.NewOpenAI(opts)
	if err != nil {
		return fmt.Errorf("%w: %w", cli.ErrInvalidInput, err)
	}
	refused := false
	for _, r := range client.Probe(ctx, llm.Request{Model: spec.LLM.Model, MaxTokens: probeTokens(p), ReasoningEffort: spec.LLM.ReasoningEffort,
		Temperature: spec.LLM.Temperature}, spec.LLM.VisionOn() && spec.LLM.VLMModel == "") {
		fmt.Fprintf(o.Out, "probe:   %s\n", r)
		refused = refused || !r.Accepted
	}
	if refused {
		return errors.New("the endpoint refused the probe: fix the settings above before a run")
	}
	return nil
}

// probeTokens is the output limit of a probe: a word, or for a reasoning
// model room to think first.
func probeTokens(p llm.Profile) int {
	if p.Reasoning {
		return 2048
	}
	return 16
}

// paperLine says what the run's paper will be written with: whether it is
// (writeup.enabled), the bibliography it may cite, TeX on this machine.
func paperLine(spec run.Spec, ideaDir string) string {
	line := "written by `scheduler writeup` (writeup.enabled: false)"
	if spec.Writeup.Enabled {
		line = "written when the search ends (writeup.enabled)"
	}
	switch keys := writeup.BibKeys(runBib(spec, rundir.Info{IdeaDir: ideaDir})); {
	case len(keys) == 0:
		line += "; no " + rundir.RefsBib + " entry (@type{key, ...}) beside the idea, no resource of class paper: it cites nothing"
	default:
		line += fmt.Sprintf("; cites only %s's entries and the resources' papers: %d (%s)", rundir.RefsBib, len(keys), strings.Join(keys, ", "))
	}
	if t := missingTeX(); t != "" {
		line += "; no TeX here (" + t + "): the paper stops at " + rundir.PaperTeX + " (scripts/services.sh install tex)"
	}
	return line
}

// metricLine says who measures a node's metric: the idea's harness (its
// files read as every node's task will carry them), or the node's program
// about itself.
func metricLine(spec run.Spec) (string, error) {
	h := spec.Evaluation.Harness
	alone := ""
	if spec.Evaluation.Exclusive {
		alone = "; each node's task alone on its worker (evaluation.exclusive)"
	}
	if h == nil {
		line := "what each node's program reports of itself: nothing checks it (evaluation.harness: docs/evaluation.md)"
		if m := spec.Measure(); m != nil {
			line += fmt.Sprintf("; the median of %d runs of it after a warm-up (evaluation.repeats)", m.Repeats)
		}
		return line + alone, nil
	}
	ev, err := h.SearchTask()
	if err != nil {
		return "", err
	}
	bytes := 0
	for _, f := range ev.Files {
		bytes += len(f.Content)
	}
	files := "1 file"
	if len(ev.Files) != 1 {
		files = fmt.Sprintf("%d files", len(ev.Files))
	}
	line := fmt.Sprintf("measured by the harness %s (%s, %d bytes): %s on %s", h.Dir, files, bytes,
		strings.Join(ev.Commands, "; "), strings.Join(ev.Inputs, ", "))
	if ev.Repeats > 0 {
		line += fmt.Sprintf(", %d repeats each", ev.Repeats)
	}
	if len(ev.Quick) > 0 {
		line += "; first, correctness only, on " + strings.Join(ev.Quick, ", ")
	}
	line += "; the programs' own numbers kept as self-reported"
	if n := len(h.HeldOut); n > 0 {
		line += fmt.Sprintf("; when the search ends, its %d best nodes and the baseline face %d held-out input(s) (in no node's task or prompt): the run's best is the best there, overfit past %.0f%%",
			h.Gate.Top, n, 100*h.Gate.OverfitShare)
	} else {
		line += "; no held-out gate (evaluation.harness.held_out)"
	}
	return line + alone, nil
}

// boundLine says what limits the run's metric on a worker's host, with
// this host's figure (docs/evaluation.md, "The machine's bound").
func boundLine(spec run.Spec) string {
	m := spec.Metric.Limit()
	if m.Bound == hostbound.BoundNone || m.Bound == hostbound.BoundAuto && !hostbound.FlopsUnit(m.Unit) {
		return "none: " + spec.Metric.Name + " is not checked against the host's peak (metric.bound)"
	}
	b := hostbound.Start(slog.New(slog.DiscardHandler)).Current()
	l, ok := hostbound.LimitOf(b, m)
	kind := cmp.Or(m.Bound, hostbound.BoundFlops)
	if !ok {
		return fmt.Sprintf("%s: beyond it a node is impossible (this host's is not known yet: its bandwidth is measured by a worker)", kind)
	}
	return fmt.Sprintf("%s: beyond %s %s a node is impossible on this host (%s); each worker uses its own host's", kind,
		strconv.FormatFloat(l.Value, 'g', 4, 64), l.Unit, l.How)
}
