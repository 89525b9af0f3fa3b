package prompt

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/hpcq/hpcq/internal/textcut"
	"github.com/hpcq/hpcq/pkg/llm"
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
// (notes, root, tree, build_plan) are accepted; others are kept by name in
// the Unknown maps, for Artifacts.Ignored.
type wire struct {
	PhaseArtifacts *struct {
		Download struct {
			Commands []string                  `json:"commands"`
			Notes    string                    `json:"notes"`
			Unknown  map[string]jsontext.Value `json:",unknown"`
		} `json:"download"`
		Coding struct {
			Workspace struct {
				Root  string         `json:"root"`
				Tree  jsontext.Value `json:"tree"`
				Files []schema.File  `json:"files"`
			} `json:"workspace"`
			Unknown map[string]jsontext.Value `json:",unknown"`
		} `json:"coding"`
		Compile struct {
			BuildPlan jsontext.Value            `json:"build_plan"`
			Commands  []string                  `json:"commands"`
			Unknown   map[string]jsontext.Value `json:",unknown"`
		} `json:"compile"`
		Run struct {
			Commands        []string                  `json:"commands"`
			ExpectedOutputs []string                  `json:"expected_outputs"`
			MetricPatterns  []schema.MetricPattern    `json:"metric_patterns"`
			Unknown         map[string]jsontext.Value `json:",unknown"`
		} `json:"run"`
		Unknown map[string]jsontext.Value `json:",unknown"`
	} `json:"phase_artifacts"`
	Constraints jsontext.Value `json:"constraints"`
}

// ignored names the members of phase_artifacts and of its sections that
// hpcq does not use, as "section.member", sorted.
func (w *wire) ignored() []string {
	pa := w.PhaseArtifacts
	var out []string
	for _, sec := range []struct {
		name    string
		unknown map[string]jsontext.Value
	}{{"", pa.Unknown}, {"download.", pa.Download.Unknown}, {"coding.", pa.Coding.Unknown}, {"compile.", pa.Compile.Unknown}, {"run.", pa.Run.Unknown}} {
		for k := range sec.unknown {
			out = append(out, sec.name+k)
		}
	}
	sort.Strings(out)
	return out
}

// replyOptions read a reply's JSON as encoding/json did (names in any case,
// a repeated name's last value kept, invalid UTF-8 replaced), at several
// times its speed: a reply carries the node's code.
var replyOptions = jsonv2.JoinOptions(jsonv2.MatchCaseInsensitiveNames(true), jsonv1.MatchCaseSensitiveDelimiter(true), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

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
		return Artifacts{}, fmt.Errorf("%w: the payload must be one JSON object, it starts with %q", ErrArtifacts, textcut.Head(text, 20))
	}
	var w wire
	if err := decodeReply(text, &w); err != nil {
		return Artifacts{}, fmt.Errorf("%w: %v", ErrArtifacts, err)
	}
	if w.PhaseArtifacts == nil {
		return Artifacts{}, fmt.Errorf(`%w: no "phase_artifacts" object`, ErrArtifacts)
	}
	pa := w.PhaseArtifacts
	a := Artifacts{Constraints: json.RawMessage(w.Constraints), Ignored: w.ignored()}
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
	if err := schema.CheckFiles(a.Phases.Coding.Workspace.Files, schema.WorkspaceLimits{}); err != nil {
		return Artifacts{}, fmt.Errorf("%w: phase_artifacts.coding.workspace.files: %v", ErrArtifacts, err)
	}
	return a, nil
}

// decodeReply reads text, one JSON value, into v with replyOptions. Its
// errors are for the model: where a value of the wrong kind is and what
// belongs there, or why the text is not JSON.
func decodeReply(text string, v any) error {
	dec := jsontext.NewDecoder(strings.NewReader(text), replyOptions)
	if err := jsonv2.UnmarshalDecode(dec, v, replyOptions); err != nil {
		var se *jsonv2.SemanticError
		switch {
		case errors.As(err, &se) && se.GoType != nil && se.Err != nil:
			// A type's own reading refused the value (a file mode).
			return fmt.Errorf("%s: %v", dotted(se.JSONPointer), se.Err)
		case se != nil && se.GoType != nil:
			return fmt.Errorf("%s: %s where %s belongs", dotted(se.JSONPointer), kindName(se.JSONKind), jsonName(se.GoType))
		}
		return fmt.Errorf("invalid JSON: %v", err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return errors.New("data after the JSON object")
	}
	return nil
}

// dotted is a JSON pointer as a path of names: /run/commands/0 is
// run.commands.0 (a name is as written, unescaped).
func dotted(p jsontext.Pointer) string {
	return strings.Join(slices.Collect(p.Tokens()), ".")
}

// kindName names a JSON value's kind.
func kindName(k jsontext.Kind) string {
	switch k {
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 't', 'f':
		return "a boolean"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 'n':
		return "null"
	}
	return "a value"
}

// jsonName names the JSON a Go type reads.
func jsonName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16,
		reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Pointer:
		return jsonName(t.Elem())
	}
	return t.String()
}
