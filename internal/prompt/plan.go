package prompt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/hpcq/hpcq/pkg/llm"
)

// ErrPlan: a Phase 0 reply holds no usable plan.
var ErrPlan = errors.New("unusable phase 0 plan")

// MaxPlanBytes bounds a Phase 0 plan.
const MaxPlanBytes = 256 << 10

// Plan is a Phase 0 plan: the fields the prompt asks for are read, the
// whole object is kept (Raw, indented) for phase0_plan.json and for the
// prompts of the node.
type Plan struct {
	Goal      string          `json:"goal"`
	Approach  string          `json:"approach"`
	Toolchain string          `json:"toolchain"`
	Build     string          `json:"build"`
	Run       string          `json:"run"`
	Risks     []string        `json:"risks"`
	Raw       json.RawMessage `json:"-"`
}

// ParsePlan reads the payload of a Phase 0 reply: one JSON object, possibly
// fenced, {"plan": {...}}, whose plan has at least a goal or an approach.
func ParsePlan(payload string) (Plan, error) {
	if len(payload) > MaxPlanBytes {
		return Plan{}, fmt.Errorf("%w: the payload has %d bytes, at most %d", ErrPlan, len(payload), MaxPlanBytes)
	}
	text := strings.TrimSpace(llm.StripFence(payload))
	var w struct {
		Plan json.RawMessage `json:"plan"`
	}
	dec := json.NewDecoder(strings.NewReader(text))
	if err := dec.Decode(&w); err != nil {
		return Plan{}, fmt.Errorf("%w: the payload is not one JSON object: %v", ErrPlan, err)
	}
	if dec.More() {
		return Plan{}, fmt.Errorf("%w: text after the JSON object", ErrPlan)
	}
	if len(w.Plan) == 0 || w.Plan[0] != '{' {
		return Plan{}, fmt.Errorf(`%w: the object has no "plan" object`, ErrPlan)
	}
	var p Plan
	if err := json.Unmarshal(w.Plan, &p); err != nil {
		return Plan{}, fmt.Errorf("%w: plan: %v", ErrPlan, err)
	}
	if strings.TrimSpace(p.Goal) == "" && strings.TrimSpace(p.Approach) == "" {
		return Plan{}, fmt.Errorf("%w: the plan has neither a goal nor an approach", ErrPlan)
	}
	var b bytes.Buffer
	if err := json.Indent(&b, w.Plan, "", "  "); err != nil {
		return Plan{}, fmt.Errorf("%w: plan: %v", ErrPlan, err)
	}
	p.Raw = b.Bytes()
	return p, nil
}

// Summary is the plan in a few lines (PHASE0_SUMMARY): goal, approach,
// toolchain, build, run; the fields it has.
func (p Plan) Summary() string {
	var b strings.Builder
	for _, f := range []struct{ name, v string }{{"goal", p.Goal}, {"approach", p.Approach}, {"toolchain", p.Toolchain}, {"build", p.Build}, {"run", p.Run}} {
		if v := strings.TrimSpace(f.v); v != "" {
			fmt.Fprintf(&b, "- %s: %s\n", f.name, v)
		}
	}
	return strings.TrimSpace(b.String())
}
