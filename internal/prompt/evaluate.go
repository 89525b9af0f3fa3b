package prompt

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// The replies of seed 003's evaluation prompts: the execution review and
// the metrics parser (the node summary's reply is ParseSummary's shape).

// ErrEvaluation: an evaluation reply that cannot be used.
var ErrEvaluation = errors.New("unusable evaluation reply")

// Bounds of the evaluation replies.
const (
	MaxEvaluationBytes = 64 << 10
	MaxParsedMetrics   = 64
	MaxSummaryChars    = 8000
)

// Review is the execution review's verdict, as a node's result.json keeps it.
type Review = rundir.Review

// ParsedMetric is a metric the metrics parser read from an output.
type ParsedMetric struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit,omitempty"`
}

// decodeOne decodes the payload (possibly fenced) as one JSON object into
// v, strictly: unknown fields and trailing data are errors.
func decodeOne(payload string, v any) error {
	if len(payload) > MaxEvaluationBytes {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrEvaluation, len(payload), MaxEvaluationBytes)
	}
	dec := json.NewDecoder(strings.NewReader(strings.TrimSpace(llm.StripFence(payload))))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: the payload is not the JSON object asked for: %v", ErrEvaluation, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: more than one JSON value", ErrEvaluation)
	}
	return nil
}

// ParseReview reads an execution review: {"is_bug": bool, "summary":
// "...", "metric_plausible": bool}; the summary is required.
func ParseReview(payload string) (Review, error) {
	var r struct {
		IsBug           *bool  `json:"is_bug"`
		Summary         string `json:"summary"`
		MetricPlausible *bool  `json:"metric_plausible"`
	}
	if err := decodeOne(payload, &r); err != nil {
		return Review{}, err
	}
	if r.IsBug == nil {
		return Review{}, fmt.Errorf("%w: is_bug is missing", ErrEvaluation)
	}
	if err := checkText("summary", r.Summary); err != nil {
		return Review{}, err
	}
	return Review{IsBug: *r.IsBug, Summary: strings.TrimSpace(r.Summary), MetricPlausible: r.MetricPlausible}, nil
}

// ParseMetricsReply reads the metrics parser's answer: {"metrics":
// [{"name", "value", "unit"}]}: names as a METRIC line's, finite values,
// no name twice, at most MaxParsedMetrics.
func ParseMetricsReply(payload string) ([]ParsedMetric, error) {
	var r struct {
		Metrics []struct {
			Name  string   `json:"name"`
			Value *float64 `json:"value"`
			Unit  string   `json:"unit"`
		} `json:"metrics"`
	}
	if err := decodeOne(payload, &r); err != nil {
		return nil, err
	}
	if len(r.Metrics) > MaxParsedMetrics {
		return nil, fmt.Errorf("%w: %d metrics, at most %d", ErrEvaluation, len(r.Metrics), MaxParsedMetrics)
	}
	seen := map[string]bool{}
	out := make([]ParsedMetric, 0, len(r.Metrics))
	for i, m := range r.Metrics {
		if err := schema.CheckMetricName(m.Name); err != nil {
			return nil, fmt.Errorf("%w: metrics[%d]: %v", ErrEvaluation, i, err)
		}
		if m.Value == nil || math.IsNaN(*m.Value) || math.IsInf(*m.Value, 0) {
			return nil, fmt.Errorf("%w: metrics[%d] (%s): the value must be a finite number", ErrEvaluation, i, m.Name)
		}
		if seen[m.Name] {
			return nil, fmt.Errorf("%w: metric %q given twice", ErrEvaluation, m.Name)
		}
		seen[m.Name] = true
		if len(m.Unit) > 64 {
			return nil, fmt.Errorf("%w: metrics[%d] (%s): unit longer than 64 bytes", ErrEvaluation, i, m.Name)
		}
		out = append(out, ParsedMetric{Name: m.Name, Value: *m.Value, Unit: strings.TrimSpace(m.Unit)})
	}
	return out, nil
}

func checkText(field, s string) error {
	switch n := len(strings.TrimSpace(s)); {
	case n == 0:
		return fmt.Errorf("%w: %s is empty", ErrEvaluation, field)
	case n > MaxSummaryChars:
		return fmt.Errorf("%w: %s has %d bytes, at most %d", ErrEvaluation, field, n, MaxSummaryChars)
	}
	return nil
}
