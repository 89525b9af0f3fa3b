package prompt

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"strings"
	"sync"
	"text/template"
	"unicode"

	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/schema"
)

//go:embed templates/*.tmpl
var templateFiles embed.FS

var templates = template.Must(template.New("").Option("missingkey=error").ParseFS(templateFiles, "templates/*.tmpl"))

// Kind is what a prompt asks for.
type Kind string

// The kinds of prompts: the node kinds of the tree search, Phase 0
// planning, and the tasks around a node.
const (
	Phase0          Kind = "phase0"
	Draft           Kind = schema.KindDraft
	Debug           Kind = schema.KindDebug
	Improve         Kind = schema.KindImprove
	Hyperparam      Kind = schema.KindHyperparam
	Ablation        Kind = schema.KindAblation
	ExecutionReview Kind = "execution_review"
	Summary         Kind = "summary"
	ParseMetrics    Kind = "parse_metrics"
	VLMAnalysis     Kind = "vlm_analysis"
)

// Kinds lists every kind.
var Kinds = []Kind{Phase0, Draft, Debug, Improve, Hyperparam, Ablation, ExecutionReview, Summary, ParseMetrics, VLMAnalysis}

// nodeKinds answer with phase_artifacts.
var nodeKinds = map[Kind]bool{Draft: true, Debug: true, Improve: true, Hyperparam: true, Ablation: true}

// ErrPrompt: a prompt lacks a section its kind needs.
var ErrPrompt = errors.New("prompt")

// Context is what a prompt is built from. Empty sections are left out;
// each kind requires the ones it cannot do without.
type Context struct {
	Idea            string // the research idea (Research idea)
	System          string // system instructions (the system message)
	Domain          string // HPC domain knowledge
	Environment     string // toolchains of the target pool's workers, machine
	Resources       string // datasets, libraries, hardware the run may use
	Phase0Plan      string
	History         string // Phase 0: earlier runs
	Code            string // the node's code (debug, improve, summary)
	BaseCode        string // the stage's best code (hyperparam, ablation)
	Change          string // the hyperparam or ablation idea
	ExecutionOutput string
	// Plots describes a node's plots for the VLM analysis: their names,
	// and the source of an SVG (the pictures themselves go as images).
	Plots        string
	PlotFeedback string
	TimeFeedback string
	// Memory is the rendered memory (memory.RenderForPrompt); WithMemory
	// selects the with-memory variant, which asks for <memory_update>.
	Memory     string
	WithMemory bool
}

type section struct{ Title, Body string }

const defaultSystem = "You are the assistant of hpcq, which runs HPC experiments on a cluster: " +
	"your answers are compiled and run by machines, exactly as you write them. Follow the response format."

// Build returns the messages of a prompt: a system message and a user
// message whose sections follow the memory design's order (Introduction,
// Research idea, the node's code and output, Instructions, Domain,
// Environment, Resources, Phase 0 plan, Memory).
func Build(kind Kind, c Context) ([]llm.Message, error) {
	if err := needs(kind, c); err != nil {
		return nil, err
	}
	intro, err := fixed("intro_", kind, c.WithMemory)
	if err != nil {
		return nil, err
	}
	secs := []section{{"Introduction", intro}, {"Research idea", c.Idea}, {"History", c.History}}
	switch kind {
	case Hyperparam:
		secs = append(secs, section{"Base code", c.BaseCode}, section{"Hyperparam idea", c.Change})
	case Ablation:
		secs = append(secs, section{"Base code", c.BaseCode}, section{"Ablation idea", c.Change})
	default:
		secs = append(secs, section{"Code", c.Code})
	}
	secs = append(secs, section{"Execution output", c.ExecutionOutput}, section{"Plots", c.Plots}, section{"Plot feedback", c.PlotFeedback},
		section{"Time feedback", c.TimeFeedback})
	if nodeKinds[kind] {
		format, err := fixed("response_format", kind, c.WithMemory)
		if err != nil {
			return nil, err
		}
		guide, err := fixed("guide_", kind, c.WithMemory)
		if err != nil {
			return nil, err
		}
		secs = append(secs, section{"Instructions", "## Response format\n\n" + format + "\n\n## Guidelines\n\n" + guide})
	}
	secs = append(secs, section{"Domain", c.Domain}, section{"Environment", c.Environment}, section{"Resources", c.Resources},
		section{"Phase 0 plan", c.Phase0Plan})
	if c.WithMemory {
		mem := c.Memory
		if strings.TrimSpace(mem) == "" {
			mem = "(the memory of this branch is empty)"
		}
		secs = append(secs, section{"Memory", mem})
	}
	var ops string
	if c.WithMemory {
		if ops, err = fixed("memory_operations", kind, true); err != nil {
			return nil, err
		}
	}
	system := c.System
	if strings.TrimSpace(system) == "" {
		system = defaultSystem
	}
	return []llm.Message{{Role: "system", Content: system}, {Role: "user", Content: sections(secs, ops)}}, nil
}

// sections writes the sections that are not blank as "# Title\n\nBody",
// a blank line apart (the last one's trailing blank space left out), then
// ops (the memory operations) after a blank line, in one allocation: a
// node's prompt carries its code, output and memory, which a template's
// buffer grew and copied several times over.
func sections(secs []section, ops string) string {
	last, size := -1, len(ops)+2
	for i, s := range secs {
		if strings.TrimSpace(s.Body) != "" {
			last = i
			size += len(s.Title) + len(s.Body) + 6
		}
	}
	var b strings.Builder
	b.Grow(size)
	for i, s := range secs[:last+1] {
		if strings.TrimSpace(s.Body) == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString("# ")
		b.WriteString(s.Title)
		b.WriteString("\n\n")
		if i == last {
			b.WriteString(strings.TrimRightFunc(s.Body, unicode.IsSpace))
		} else {
			b.WriteString(s.Body)
		}
	}
	if ops != "" {
		b.WriteString("\n\n")
		b.WriteString(ops)
	}
	return strings.TrimSpace(b.String())
}

// fixedKey names a template's text for a kind and variant.
type fixedKey struct {
	name       string
	kind       Kind
	withMemory bool
}

// fixedTexts keeps the texts of the templates that depend only on the
// kind and the variant (introduction, response format, guidelines, memory
// operations), made once.
var fixedTexts sync.Map // fixedKey -> string

// fixed is the text of template name (with the kind appended when name
// ends in "_") for the kind and the variant.
func fixed(name string, kind Kind, withMemory bool) (string, error) {
	key := fixedKey{name, kind, withMemory}
	if v, ok := fixedTexts.Load(key); ok {
		return v.(string), nil
	}
	tmpl := name
	if strings.HasSuffix(name, "_") {
		tmpl += string(kind)
	}
	text, err := exec(tmpl, map[string]any{"WithMemory": withMemory, "Purpose": string(kind)})
	if err != nil {
		return "", err
	}
	fixedTexts.Store(key, text)
	return text, nil
}

func exec(name string, data any) (string, error) {
	var b bytes.Buffer
	if err := templates.ExecuteTemplate(&b, name, data); err != nil {
		return "", fmt.Errorf("%w: template %s: %v", ErrPrompt, name, err)
	}
	return strings.TrimSpace(b.String()), nil
}

// needs checks the sections a kind cannot do without.
func needs(kind Kind, c Context) error {
	type field struct{ name, v string }
	var fields []field
	switch kind {
	case Phase0, Draft:
		fields = []field{{"Research idea", c.Idea}}
	case Debug:
		fields = []field{{"Code", c.Code}, {"Execution output", c.ExecutionOutput}}
	case Improve, Summary:
		fields = []field{{"Code", c.Code}}
	case Hyperparam:
		fields = []field{{"Base code", c.BaseCode}, {"Hyperparam idea", c.Change}}
	case Ablation:
		fields = []field{{"Base code", c.BaseCode}, {"Ablation idea", c.Change}}
	case ExecutionReview, ParseMetrics:
		fields = []field{{"Execution output", c.ExecutionOutput}}
	case VLMAnalysis:
		fields = []field{{"Plots", c.Plots}}
	default:
		return fmt.Errorf("%w: unknown kind %q", ErrPrompt, kind)
	}
	for _, f := range fields {
		if strings.TrimSpace(f.v) == "" {
			return fmt.Errorf("%w: a %s prompt needs %s", ErrPrompt, kind, f.name)
		}
	}
	return nil
}

// Change is the change a hyperparam or ablation node is asked for (kind
// Hyperparam or Ablation), with what its siblings already tried ("- id:
// summary" lines), so that they do not repeat it.
func Change(kind Kind, tried []string) string {
	var b strings.Builder
	if kind == Hyperparam {
		b.WriteString("Tune one hyperparameter of the base code (a problem or block size, a thread count or schedule, a compiler flag, " +
			"a data layout parameter): choose one that matters for the metric, try a few values in the run, keep the best.")
	} else {
		b.WriteString("Remove or disable one component of the base code (an optimization, a pragma, a compiler flag, a data layout choice) " +
			"and measure what the metric loses without it: the run must report the metric of the ablated program.")
	}
	if len(tried) > 0 {
		b.WriteString(" Do not repeat what these siblings did:\n" + strings.Join(tried, "\n"))
	}
	return b.String()
}
