package run

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/hpcq/hpcq/internal/hostbound"
	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/schema"
)

// Spec is a run's run.yaml. Zero values take the defaults of Defaults.
type Spec struct {
	Title string `yaml:"title"`
	// Idea is the research idea; IdeaFile reads it from a file (relative to
	// run.yaml).
	Idea     string `yaml:"idea"`
	IdeaFile string `yaml:"idea_file"`
	// Pool the nodes run in, and the toolchains they need.
	Pool     string   `yaml:"pool"`
	Requires []string `yaml:"requires"`
	Metric   Metric   `yaml:"metric"`
	Stages   Stages   `yaml:"stages"`
	Search   Search   `yaml:"search"`
	LLM      LLM      `yaml:"llm"`
	Phase1   Phase1   `yaml:"phase1"`
	Memory   Memory   `yaml:"memory"`
	// Prompt sets the System message and the Domain section of every
	// prompt (default: hpcq's system message, no Domain section).
	Prompt Prompt `yaml:"prompt"`
	// Evaluation turns seed 003's evaluation prompts on or off.
	Evaluation Evaluation `yaml:"evaluation"`
	// Limits of every node's phases (a node's task carries them).
	Limits     schema.Limits `yaml:"limits"`
	LogPrompts *bool         `yaml:"log_prompts"`
	// Resources is a resources.yaml/.json file (relative to run.yaml).
	Resources string `yaml:"resources"`
	// Shell "login" runs every command of the run's tasks in a login shell
	// of its own (bash -lc); default: bash -c in each worker's login
	// environment, captured once at its start.
	Shell string `yaml:"shell"`
	// Container is the image every node's phases run in.
	Container *Container `yaml:"container"`
	// Writeup writes the run's paper when the search ends.
	Writeup Writeup `yaml:"writeup"`
}

// Writeup is the paper a run ends with (`scheduler writeup`): the model
// writes it around the run's facts, every number checked, compiled with
// TeX in a task's sandbox (docs/results.md).
type Writeup struct {
	// Enabled writes it when a search ends with a best node (default off:
	// it costs calls; `scheduler writeup` writes it later).
	Enabled bool `yaml:"enabled"`
	// MaxRounds bounds the drafts before the vision review [3].
	MaxRounds int `yaml:"max_rounds"`
}

// MaxWriteupRounds bounds writeup.max_rounds.
const MaxWriteupRounds = 10

// Container names the image of a run's nodes (docs/tasks.md, "Container
// images").
type Container struct {
	// Image is its path (relative to run.yaml, else absolute: on a cluster,
	// a path every worker sees, on a shared file system).
	Image string `yaml:"image"`
	// Digest, when set, is the image the run expects ("sha256:<hex>").
	Digest string `yaml:"digest"`
	// Runtime runs the commands in it: hpcq (the default, the worker's own
	// sandbox), or the site's apptainer, singularity, charliecloud or
	// podman.
	Runtime string `yaml:"runtime"`
}

// Task is what a node's task carries of it (nil: none).
func (c *Container) Task() *schema.Container {
	if c == nil {
		return nil
	}
	return &schema.Container{Image: c.Image, Digest: c.Digest, Runtime: c.Runtime}
}

// Metric is what the search optimizes.
type Metric struct {
	Name      string `yaml:"name"`
	Direction string `yaml:"direction"` // maximize or minimize
	Unit      string `yaml:"unit"`
	// Bound is what limits the metric on its host (docs/evaluation.md):
	// flops (the peak FLOP/s), bandwidth (the memory bandwidth), roofline
	// (with Intensity, FLOP per byte) or none; unset: flops for a FLOP/s
	// unit. A node's metric beyond it is impossible.
	Bound     string  `yaml:"bound"`
	Intensity float64 `yaml:"intensity"`
}

// Limit is what run.yaml says of the metric's bound.
func (m Metric) Limit() hostbound.Metric {
	if m.Direction != "maximize" {
		return hostbound.Metric{Bound: hostbound.BoundNone}
	}
	return hostbound.Metric{Bound: m.Bound, Intensity: m.Intensity, Unit: m.Unit}
}

// Stage is one stage of the tree search.
type Stage struct {
	MaxIterations int `yaml:"max_iterations"`
}

// Stages are the four stages, in order.
type Stages struct {
	InitialImplementation Stage `yaml:"initial_implementation"`
	BaselineTuning        Stage `yaml:"baseline_tuning"`
	CreativeResearch      Stage `yaml:"creative_research"`
	AblationStudies       Stage `yaml:"ablation_studies"`
}

// Search parameters.
type Search struct {
	NumDrafts     int      `yaml:"num_drafts"`
	DebugProb     *float64 `yaml:"debug_prob"`
	MaxDebugDepth int      `yaml:"max_debug_depth"`
	// Slots: nodes in flight at once (default: the live workers' slots).
	Slots int  `yaml:"slots"`
	Judge bool `yaml:"judge"` // an LLM judge picks the best node
}

// LLM settings of the run (the endpoint and key come from the
// environment).
type LLM struct {
	Model       string   `yaml:"model"`
	Temperature *float64 `yaml:"temperature"`
	// MaxTokens bounds each reply: max_tokens, or for a reasoning model
	// max_completion_tokens (its reasoning included).
	MaxTokens int `yaml:"max_tokens"`
	// Reasoning says whether the model is a reasoning model (no
	// temperature, max_completion_tokens, reasoning_effort); unset: told
	// from its name (o1, o3, o4-mini, gpt-5, gpt-5.2, ...).
	Reasoning *bool `yaml:"reasoning,omitempty"`
	// ReasoningEffort of a reasoning model: none, minimal, low, medium or
	// high; unset: the endpoint's default.
	ReasoningEffort string `yaml:"reasoning_effort,omitempty"`
	// MaxTokensCap bounds the limit a cut reply is asked again with: a
	// reasoning model's cut with nothing said (0: four times max_tokens);
	// another cut reply is asked again with twice the limit only when
	// this is set (a chat model's own output limit is not known).
	MaxTokensCap int        `yaml:"max_tokens_cap,omitempty"`
	Retries      int        `yaml:"retries"` // unusable replies retried with feedback
	Prices       llm.Prices `yaml:"prices"`
	Budget       llm.Budget `yaml:"budget"`
	// Cache answers every request seen before from the run's cache (and
	// HPCQ_LLM_CACHE), not only those at temperature 0, whose replies are
	// reproducible.
	Cache bool `yaml:"cache"`
	// Vision: the model accepts images. A node's plots are then analysed
	// (seed 003's VLM analysis): PNG, JPEG, GIF and WEBP plots sent as
	// images, an SVG's source as text; the analysis goes into the node's
	// memory, its result.json and report, and the Plot feedback of its
	// children's prompts. VLMModel asks another model for it (and implies
	// vision).
	Vision   bool   `yaml:"vision"`
	VLMModel string `yaml:"vlm_model"`
}

// VisionOn: plots are analysed (llm.vision or llm.vlm_model).
func (l LLM) VisionOn() bool { return l.Vision || l.VLMModel != "" }

// Prompt: text of the run's own for every prompt.
type Prompt struct {
	System string `yaml:"system"`
	Domain string `yaml:"domain"`
}

// Evaluation: the model's judgement of a node's run where exit codes and
// the metric scanners cannot decide (default: all on).
type Evaluation struct {
	// ExecutionReview judges a run that exited 0 but reported no metric,
	// or whose output looks wrong (NaN, errors): bug or not, and why.
	ExecutionReview *bool `yaml:"execution_review"`
	// ParseMetrics reads the metrics from a run's output when the
	// scanners found none of the run's metric.
	ParseMetrics *bool `yaml:"parse_metrics"`
	// NodeSummary writes a summary of each node that ran (result.json, the
	// memory, the report's judge).
	NodeSummary *bool `yaml:"node_summary"`
	// Harness, when set, is the idea's evaluator: a node's metric is its
	// measure, not what the program reports of itself.
	Harness *Harness `yaml:"harness"`
	// Repeats, without a harness, is how many times a node's run phase is
	// measured after a warm-up, its metric the median of the program's
	// reports (1: once, no warm-up). Unset: DefaultRepeats for a metric
	// whose unit is a time or a rate (a timing is noisy), else 1.
	Repeats *int `yaml:"repeats"`
	// Exclusive: each node's task runs alone on its worker (no other task
	// starts beside it), so that no co-tenant is in its timings; on an
	// exclusive Slurm queue of slurm-bridge, alone on its node.
	Exclusive bool `yaml:"exclusive"`
}

// DefaultRepeats are the measured runs of a timed metric without a harness.
const DefaultRepeats = 5

// Measure is how a node's run phase is measured without a harness (nil:
// once).
func (s *Spec) Measure() *schema.Measure {
	if s.Evaluation.Harness != nil {
		return nil
	}
	n := 1
	switch {
	case s.Evaluation.Repeats != nil:
		n = *s.Evaluation.Repeats
	case hostbound.Timed(s.Metric.Unit):
		n = DefaultRepeats
	}
	if n < 2 {
		return nil
	}
	return &schema.Measure{Metric: s.Metric.Name, Repeats: n}
}

// Phase1 is the download/install phase.
type Phase1 struct {
	Mode     string `yaml:"mode"` // iterative or batch
	MaxSteps int    `yaml:"max_steps"`
}

// Memory settings: on or off, and the memory's own configuration.
type Memory struct {
	Enabled *bool `yaml:"enabled"`
	// DBPath is the SQLite memory file (the seed's db_path; default:
	// RUN_DIR/memory/memory.sqlite). Unused with the cluster store.
	DBPath string `yaml:"db_path"`
	// The seed's persistence toggles (default true). PersistIdeaMD keeps
	// the whole idea in archival memory (tags IDEA_MD, ROOT_IDEA);
	// AlwaysInjectIdeaSummary keeps IDEA_SUMMARY in the root's core, so
	// every prompt's memory section has it. PersistPhase0Internal keeps
	// each node's whole Phase 0 output in archival memory (tag
	// PHASE0_INTERNAL); AlwaysInjectPhase0Summary keeps the plan's summary
	// in the node's core (PHASE0_SUMMARY).
	PersistPhase0Internal     *bool `yaml:"persist_phase0_internal"`
	AlwaysInjectPhase0Summary *bool `yaml:"always_inject_phase0_summary"`
	PersistIdeaMD             *bool `yaml:"persist_idea_md"`
	AlwaysInjectIdeaSummary   *bool `yaml:"always_inject_idea_summary"`
	// The export at the end of the run (memory/<filename>).
	FinalMemoryEnabled      *bool  `yaml:"final_memory_enabled"`
	FinalMemoryFilenameMD   string `yaml:"final_memory_filename_md"`
	FinalMemoryFilenameJSON string `yaml:"final_memory_filename_json"`
	// UseLLMCompression: sections over budget are compressed by the model
	// (CompressionModel, default the run's model); off, they are cut.
	UseLLMCompression *bool  `yaml:"use_llm_compression"`
	CompressionModel  string `yaml:"compression_model"`
	// The memory call log (memory_calls.jsonl) in LogDir (default
	// RUN_DIR/memory; relative to run.yaml), if LogEnabled.
	LogEnabled    *bool  `yaml:"memory_log_enabled"`
	LogDir        string `yaml:"memory_log_dir"`
	memory.Config `yaml:",inline"`
}

// On reads a toggle of the memory block: nil (a spec.json written before
// the toggle existed) is the default, on.
func On(toggle *bool) bool { return toggle == nil || *toggle }

// ExportNames are the file names of the memory export (defaults for "").
func (m Memory) ExportNames() (md, json string) {
	md, json = m.FinalMemoryFilenameMD, m.FinalMemoryFilenameJSON
	if md == "" {
		md = memory.ExportMarkdown
	}
	if json == "" {
		json = memory.ExportJSON
	}
	return md, json
}

// Defaults are the values of a field left out.
func Defaults() Spec {
	// Each toggle has a pointer of its own: decoding run.yaml writes
	// through them, and a shared one would turn every toggle off at once.
	on := func() *bool { t := true; return &t }
	f := 0.5
	return Spec{
		Pool:   "cpu",
		Metric: Metric{Direction: "maximize"},
		Stages: Stages{InitialImplementation: Stage{8}, BaselineTuning: Stage{4}, CreativeResearch: Stage{6}, AblationStudies: Stage{3}},
		Search: Search{NumDrafts: 3, DebugProb: &f, MaxDebugDepth: 3},
		LLM:    LLM{MaxTokens: 8000, Retries: 2},
		Phase1: Phase1{Mode: "iterative", MaxSteps: 12},
		Memory: Memory{Enabled: on(), Config: memory.Defaults(), PersistPhase0Internal: on(), AlwaysInjectPhase0Summary: on(),
			PersistIdeaMD: on(), AlwaysInjectIdeaSummary: on(), FinalMemoryEnabled: on(), FinalMemoryFilenameMD: memory.ExportMarkdown,
			FinalMemoryFilenameJSON: memory.ExportJSON, UseLLMCompression: on(), LogEnabled: on()},
		LogPrompts: on(),
		Evaluation: Evaluation{ExecutionReview: on(), ParseMetrics: on(), NodeSummary: on()},
	}
}

// ErrSpec: run.yaml is invalid; the message names the field.
var ErrSpec = errors.New("run.yaml")

// LoadSpec reads and checks run.yaml: unknown keys are errors (with their
// line), defaults fill what is left out, and idea_file and resources are
// resolved against the file's directory.
func LoadSpec(path string) (Spec, error) { return loadSpec(path, nil) }

// Files of an idea directory.
const (
	SpecFile      = "run.yaml"
	IdeaFile      = "idea.md"
	ResourcesFile = "resources.yaml"
)

// LoadIdeaDir reads an idea directory: its run.yaml, with idea.md as the
// idea when run.yaml gives neither idea nor idea_file, and resources.yaml
// as the resources when run.yaml names none and the file exists.
func LoadIdeaDir(dir string) (Spec, error) {
	return loadSpec(filepath.Join(dir, SpecFile), func(s *Spec) {
		if _, err := os.Stat(filepath.Join(dir, IdeaFile)); err == nil && s.Idea == "" && s.IdeaFile == "" {
			s.IdeaFile = IdeaFile
		}
		if s.Resources == "" {
			if _, err := os.Stat(filepath.Join(dir, ResourcesFile)); err == nil {
				s.Resources = ResourcesFile
			}
		}
	})
}

func loadSpec(path string, fill func(*Spec)) (Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Spec{}, fmt.Errorf("%w: %w", ErrSpec, err)
	}
	s := Defaults()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		return Spec{}, fmt.Errorf("%w: %s: %v", ErrSpec, path, err)
	}
	if fill != nil {
		fill(&s)
	}
	dir := filepath.Dir(path)
	if s.IdeaFile != "" {
		if s.Idea != "" {
			return Spec{}, fmt.Errorf("%w: %s: idea and idea_file: give one", ErrSpec, path)
		}
		p := s.IdeaFile
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return Spec{}, fmt.Errorf("%w: idea_file: %w", ErrSpec, err)
		}
		s.Idea = string(b)
	}
	if s.Resources != "" && !filepath.IsAbs(s.Resources) {
		s.Resources = filepath.Join(dir, s.Resources)
	}
	s.Evaluation.Harness.resolve(dir)
	if s.Container != nil && s.Container.Image != "" && !filepath.IsAbs(s.Container.Image) &&
		!strings.HasPrefix(s.Container.Image, schema.StoredImagePrefix) {
		// Absolute: the task carries it to workers whose directory is not
		// the scheduler's.
		abs, err := filepath.Abs(filepath.Join(dir, s.Container.Image))
		if err != nil {
			return Spec{}, fmt.Errorf("%w: container.image: %w", ErrSpec, err)
		}
		s.Container.Image = abs
	}
	for _, p := range []*string{&s.Memory.DBPath, &s.Memory.LogDir} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	if err := s.Validate(); err != nil {
		return Spec{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Validate reports the first invalid field.
//
// Long: one check per key of run.yaml, in the order of the file, so that a
// reader sees every rule.
func (s Spec) Validate() error {
	if err := s.Evaluation.Harness.validate(); err != nil {
		return err
	}
	switch s.Shell {
	case "", "plain", "login":
	default:
		return fmt.Errorf("run.yaml: shell: %q, must be plain or login", s.Shell)
	}
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrSpec, field, fmt.Sprintf(format, args...))
	}
	if err := s.Container.Task().Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrSpec, err)
	}
	if strings.TrimSpace(s.Idea) == "" {
		return bad("idea", "is required: idea.md in the idea directory, or idea / idea_file in run.yaml")
	}
	if err := schema.ValidatePool(s.Pool); err != nil {
		return bad("pool", "%v", err)
	}
	if s.Metric.Name == "" {
		return bad("metric.name", "is required: the metric the search optimizes")
	}
	if err := schema.CheckMetricName(s.Metric.Name); err != nil {
		return bad("metric.name", "%v", err)
	}
	if s.Metric.Direction != "maximize" && s.Metric.Direction != "minimize" {
		return bad("metric.direction", "%q, must be maximize or minimize", s.Metric.Direction)
	}
	if s.Metric.Bound != "" && s.Metric.Bound != hostbound.BoundNone && s.Metric.Direction != "maximize" {
		return bad("metric.bound", "%s bounds a rate from above: the metric must be maximized", s.Metric.Bound)
	}
	if err := (hostbound.Metric{Bound: s.Metric.Bound, Intensity: s.Metric.Intensity, Unit: s.Metric.Unit}).Check(); err != nil {
		return bad("metric.bound", "%v", err)
	}
	if r := s.Evaluation.Repeats; r != nil && (*r < 1 || *r > schema.MaxEvalRepeats) {
		return bad("evaluation.repeats", "%d, must be 1 to %d", *r, schema.MaxEvalRepeats)
	}
	for i, v := range []int{s.Stages.InitialImplementation.MaxIterations, s.Stages.BaselineTuning.MaxIterations,
		s.Stages.CreativeResearch.MaxIterations, s.Stages.AblationStudies.MaxIterations} {
		if v < 0 {
			return bad("stages."+schema.Stages[i]+".max_iterations", "%d, must not be negative", v)
		}
	}
	if s.Stages.InitialImplementation.MaxIterations == 0 {
		return bad("stages.initial_implementation.max_iterations", "must be at least 1")
	}
	if s.Search.NumDrafts < 1 {
		return bad("search.num_drafts", "%d, must be at least 1", s.Search.NumDrafts)
	}
	if p := *s.Search.DebugProb; p < 0 || p > 1 {
		return bad("search.debug_prob", "%g, must be 0 to 1", p)
	}
	if s.Search.MaxDebugDepth < 0 || s.Search.Slots < 0 {
		return bad("search", "max_debug_depth and slots must not be negative")
	}
	if t := s.LLM.Temperature; t != nil && (*t < 0 || *t > 2) {
		return bad("llm.temperature", "%g, must be 0 to 2", *t)
	}
	if s.LLM.MaxTokens < 1 || s.LLM.Retries < 0 {
		return bad("llm", "max_tokens must be at least 1 and retries not negative")
	}
	if err := llm.CheckReasoningEffort(s.LLM.ReasoningEffort); err != nil {
		return bad("llm.reasoning_effort", "%v", err)
	}
	if c := s.LLM.MaxTokensCap; c < 0 || c > 0 && c < s.LLM.MaxTokens {
		return bad("llm.max_tokens_cap", "%d, must be at least max_tokens (%d)", c, s.LLM.MaxTokens)
	}
	if strings.TrimSpace(s.LLM.VLMModel) != s.LLM.VLMModel {
		return bad("llm.vlm_model", "%q has spaces around it", s.LLM.VLMModel)
	}
	if s.LLM.Budget.MaxCostUSD < 0 || s.LLM.Budget.MaxTokens < 0 {
		return bad("llm.budget", "must not be negative")
	}
	for m, p := range s.LLM.Prices {
		if p.InPerMTok < 0 || p.OutPerMTok < 0 || p.CachedInPerMTok < 0 {
			return bad("llm.prices."+m, "must not be negative")
		}
	}
	if s.Phase1.Mode != "iterative" && s.Phase1.Mode != "batch" {
		return bad("phase1.mode", "%q, must be iterative or batch", s.Phase1.Mode)
	}
	if s.Phase1.MaxSteps < 1 {
		return bad("phase1.max_steps", "%d, must be at least 1", s.Phase1.MaxSteps)
	}
	for _, f := range []struct{ key, name, ext string }{{"memory.final_memory_filename_md", s.Memory.FinalMemoryFilenameMD, ".md"},
		{"memory.final_memory_filename_json", s.Memory.FinalMemoryFilenameJSON, ".json"}} {
		if f.name != "" && (f.name != filepath.Base(f.name) || !strings.HasSuffix(f.name, f.ext)) {
			return bad(f.key, "%q: a file name (no directory) ending in %s", f.name, f.ext)
		}
	}
	if md, js := s.Memory.ExportNames(); md == js {
		return bad("memory.final_memory_filename_json", "the same name as final_memory_filename_md")
	}
	if err := s.Memory.Config.Validate(); err != nil {
		return fmt.Errorf("%w: memory: %v", ErrSpec, err)
	}
	if r := s.Writeup.MaxRounds; r < 0 || r > MaxWriteupRounds {
		return bad("writeup.max_rounds", "%d, must be 0 (the default, 3) to %d", r, MaxWriteupRounds)
	}
	t := schema.NodeTask{V: schema.Version, RunID: "r", NodeID: "n", Attempt: 1, Kind: "draft", Pool: s.Pool, Limits: s.Limits,
		Artifacts: schema.Artifacts{Run: schema.RunPhase{Commands: []string{"true"}}}}
	if err := t.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrSpec, err)
	}
	return nil
}
