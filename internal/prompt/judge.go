package prompt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/hpcq/hpcq/pkg/llm"
)

// Candidate is a node the judge may pick.
type Candidate struct {
	ID      string
	Metric  float64
	Summary string // what the node did (its plan, its execution review)
}

// ErrJudge: a judge reply that does not pick one of the candidates.
var ErrJudge = errors.New("unusable judge reply")

// ParseVerdict reads a judge reply: {"best": "<node id>", "reason": "..."},
// where best must be one of ids.
func ParseVerdict(reply string, ids []string) (best, reason string, err error) {
	var v struct {
		Best   string `json:"best"`
		Reason string `json:"reason"`
	}
	dec := json.NewDecoder(strings.NewReader(strings.TrimSpace(llm.StripFence(reply))))
	if err := dec.Decode(&v); err != nil {
		return "", "", fmt.Errorf("%w: want {\"best\": \"<node id>\", \"reason\": \"...\"}: %v", ErrJudge, err)
	}
	if dec.More() {
		return "", "", fmt.Errorf("%w: data after the JSON object", ErrJudge)
	}
	for _, id := range ids {
		if v.Best == id {
			return v.Best, strings.TrimSpace(v.Reason), nil
		}
	}
	return "", "", fmt.Errorf("%w: %q is not one of the candidates %s", ErrJudge, v.Best, strings.Join(ids, ", "))
}

// Judge asks the model to pick the best node among candidates (the
// search's optional LLM judge). The metric decides when the judge cannot:
// a failing client or an unusable reply returns the best by metric, with
// the reason saying so.
func Judge(ctx context.Context, c llm.Client, idea, metric string, maximize bool, cands []Candidate) (best, reason string) {
	if len(cands) == 0 {
		return "", "no candidates"
	}
	byMetric := cands[0]
	for _, k := range cands[1:] {
		if (maximize && k.Metric > byMetric.Metric) || (!maximize && k.Metric < byMetric.Metric) {
			byMetric = k
		}
	}
	if len(cands) == 1 {
		return byMetric.ID, "the only candidate"
	}
	dir := "higher"
	if !maximize {
		dir = "lower"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Research idea\n\n%s\n\n# Candidates\n\nThe metric is %s (%s is better).\n\n", idea, metric, dir)
	ids := make([]string, len(cands))
	for i, k := range cands {
		ids[i] = k.ID
		fmt.Fprintf(&b, "## %s: %s = %g\n\n%s\n\n", k.ID, metric, k.Metric, strings.TrimSpace(k.Summary))
	}
	b.WriteString("# Instructions\n\nPick the node that best serves the research idea: the metric first, then whether the result is " +
		"trustworthy (a plausible measurement, a correct program) and general. Answer with one JSON object: " +
		`{"best": "<node id>", "reason": "..."}`)
	resp, err := c.Chat(ctx, llm.Request{Messages: []llm.Message{{Role: "system", Content: defaultSystem}, {Role: "user", Content: b.String()}},
		JSON: true, Purpose: "judge"})
	if err != nil {
		return byMetric.ID, fmt.Sprintf("by metric: the judge failed: %v", err)
	}
	id, why, err := ParseVerdict(resp.Content, ids)
	if err != nil {
		return byMetric.ID, fmt.Sprintf("by metric: %v", err)
	}
	return id, why
}
