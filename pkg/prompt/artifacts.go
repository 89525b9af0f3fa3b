package prompt

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/phases"
	"github.com/hpcq/hpcq/pkg/schema"
)

// MaxPayloadBytes bounds the JSON payload of a reply.
const MaxPayloadBytes = 16 << 20

// ErrArtifacts: a reply's payload cannot be turned into phase artifacts.
// The message names the field and the rule, for the feedback to the model
// and for the node's buggy reason.
var ErrArtifacts = errors.New("unusable phase_artifacts")

// Artifacts are what a code-writing reply yields.
type Artifacts struct {
	Phases schema.Artifacts
	// Constraints as the model gave them (JSON), for the prompt logs.
	Constraints json.RawMessage
	// Notes: download notes and the compile build plan, when given.
	Notes []string
	// Ignored names fields of phase_artifacts hpcq does not use.
	Ignored []string
}

// The reply's format, seed 003's phase_artifacts: fields hpcq does not run
// (notes, root, tree, build_plan) are accepted.
type wire struct {
	PhaseArtifacts *struct {
		Download struct {
			Commands []string `json:"commands"`
			Notes    string   `json:"notes"`
		} `json:"download"`
		Coding struct {
			Workspace struct {
				Root  string          `json:"root"`
				Tree  json.RawMessage `json:"tree"`
				Files []schema.File   `json:"files"`
			} `json:"workspace"`
		} `json:"coding"`
		Compile struct {
			BuildPlan json.RawMessage `json:"build_plan"`
			Commands  []string        `json:"commands"`
		} `json:"compile"`
		Run struct {
			Commands        []string               `json:"commands"`
			ExpectedOutputs []string               `json:"expected_outputs"`
			MetricPatterns  []schema.MetricPattern `json:"metric_patterns"`
		} `json:"run"`
	} `json:"phase_artifacts"`
	Constraints json.RawMessage `json:"constraints"`
}

// known fields of phase_artifacts and its sections; others are reported.
var known = map[string]map[string]bool{
	"":         {"download": true, "coding": true, "compile": true, "run": true},
	"download": {"commands": true, "notes": true},
	"coding":   {"workspace": true},
	"compile":  {"build_plan": true, "commands": true},
	"run":      {"commands": true, "expected_outputs": true, "metric_patterns": true},
}

// ParseArtifacts reads the payload of a reply (what follows the
// <memory_update> block): one JSON object, possibly in a markdown fence,
// with phase_artifacts. It checks what a worker would check before running
// anything: commands, workspace paths (no absolute paths, "..", control
// characters, duplicates), sizes, metric patterns.
func ParseArtifacts(payload string) (Artifacts, error) {
	if len(payload) > MaxPayloadBytes {
		return Artifacts{}, fmt.Errorf("%w: the payload has %d bytes, at most %d", ErrArtifacts, len(payload), MaxPayloadBytes)
	}
	text := strings.TrimSpace(llm.StripFence(payload))
	if text == "" {
		return Artifacts{}, fmt.Errorf("%w: the reply has no JSON payload", ErrArtifacts)
	}
	if text[0] != '{' {
		return Artifacts{}, fmt.Errorf("%w: the payload must be one JSON object, it starts with %q", ErrArtifacts, firstChars(text, 20))
	}
	var w wire
	dec := json.NewDecoder(strings.NewReader(text))
	if err := dec.Decode(&w); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return Artifacts{}, fmt.Errorf("%w: %s: a %s where %s belongs", ErrArtifacts, te.Field, te.Value, te.Type)
		}
		return Artifacts{}, fmt.Errorf("%w: invalid JSON: %v", ErrArtifacts, err)
	}
	if dec.More() {
		return Artifacts{}, fmt.Errorf("%w: data after the JSON object", ErrArtifacts)
	}
	if w.PhaseArtifacts == nil {
		return Artifacts{}, fmt.Errorf(`%w: no "phase_artifacts" object`, ErrArtifacts)
	}
	pa := w.PhaseArtifacts
	a := Artifacts{Constraints: w.Constraints, Ignored: ignored(text)}
	a.Phases = schema.Artifacts{
		Download: schema.CommandsPhase{Commands: pa.Download.Commands},
		Coding:   schema.CodingPhase{Workspace: schema.Workspace{Files: pa.Coding.Workspace.Files}},
		Compile:  schema.CommandsPhase{Commands: pa.Compile.Commands},
		Run:      schema.RunPhase{Commands: pa.Run.Commands, ExpectedOutputs: pa.Run.ExpectedOutputs, MetricPatterns: pa.Run.MetricPatterns},
	}
	if pa.Download.Notes != "" {
		a.Notes = append(a.Notes, "download: "+pa.Download.Notes)
	}
	if len(pa.Compile.BuildPlan) > 0 && string(pa.Compile.BuildPlan) != "null" {
		a.Notes = append(a.Notes, "build plan: "+string(pa.Compile.BuildPlan))
	}
	// The checks a task gets before it is published and before a worker
	// writes a file: the same code, so the model hears the same rules.
	t := schema.NodeTask{V: schema.Version, RunID: "check", NodeID: "check", Attempt: 1, Kind: "draft", Pool: "cpu", Artifacts: a.Phases}
	if err := t.Validate(); err != nil {
		return Artifacts{}, fmt.Errorf("%w: %s", ErrArtifacts, strings.ReplaceAll(err.Error(), "artifacts.", "phase_artifacts."))
	}
	if err := phases.CheckFiles(a.Phases.Coding.Workspace.Files, phases.WorkspaceLimits{}); err != nil {
		return Artifacts{}, fmt.Errorf("%w: phase_artifacts.coding.workspace.files: %v", ErrArtifacts, err)
	}
	return a, nil
}

// ignored lists the fields of phase_artifacts and its sections that hpcq
// does not use, as "section.field".
func ignored(text string) []string {
	var top struct {
		PA map[string]json.RawMessage `json:"phase_artifacts"`
	}
	if json.Unmarshal([]byte(text), &top) != nil {
		return nil
	}
	var out []string
	for k, v := range top.PA {
		if !known[""][k] {
			out = append(out, k)
			continue
		}
		var sec map[string]json.RawMessage
		if json.Unmarshal(v, &sec) != nil {
			continue
		}
		for f := range sec {
			if !known[k][f] {
				out = append(out, k+"."+f)
			}
		}
	}
	sort.Strings(out)
	return out
}

func firstChars(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
