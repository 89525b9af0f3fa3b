// Package evaluate is the idea's evaluator as hpcq runs it: the contract
// between hpcq and a harness the user writes (what it is given, what it
// reports), the report read and checked, and a node's verdict from it.
//
// The harness runs after the node's own phases, in a sandbox of its own,
// with the node's built files read-only under HPCQ_NODE; for each input
// hpcq asks it to measure (HPCQ_INPUTS, one per line) it writes one JSON
// line per repeat to the file HPCQ_EVAL_REPORT names:
//
//	{"input": "N=1000", "repeat": 1, "correct": true, "error": 2.1e-12,
//	 "tolerance": 1e-9, "metric": 14.2, "unit": "GFLOP/s"}
//
// Repeat 0 is a warm-up: read, checked, not kept for the metric. A harness
// that exits 0 has evaluated the node (each line says whether it was
// correct); any other exit says the evaluation could not be made, and the
// node is buggy with the harness's words.
package evaluate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/hpcq/hpcq/internal/textcut"
	"github.com/hpcq/hpcq/pkg/schema"
)

// Bounds of a report: a harness that writes more is refused, not read.
const (
	MaxReportBytes = 1 << 20
	MaxSamples     = 10_000
	MaxInputBytes  = 200
	MaxNoteBytes   = 500
)

// ErrReport: a report hpcq does not take; the error says which line and why.
var ErrReport = errors.New("evaluation report")

// ParseReport reads a harness's report: JSON lines, blank lines skipped.
// Every line must be one object of the contract's fields (an unknown field
// is refused: a misspelt "corect" must not read as incorrect), its numbers
// finite, its texts valid UTF-8 within their bounds.
func ParseReport(data []byte) ([]schema.EvalSample, error) {
	if len(data) > MaxReportBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrReport, len(data), MaxReportBytes)
	}
	var out []schema.EvalSample
	for n, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if len(out) == MaxSamples {
			return nil, fmt.Errorf("%w: more than %d lines", ErrReport, MaxSamples)
		}
		s, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrReport, n+1, err)
		}
		out = append(out, s)
	}
	return out, nil
}

func parseLine(line []byte) (schema.EvalSample, error) {
	var raw struct {
		schema.EvalSample
		Correct *bool `json:"correct"`
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return schema.EvalSample{}, fmt.Errorf("%q is not a report line: %v", textcut.Head(string(line), 80), err)
	}
	if dec.More() {
		return schema.EvalSample{}, fmt.Errorf("%q: more than one value on the line", textcut.Head(string(line), 80))
	}
	s := raw.EvalSample
	switch {
	case raw.Correct == nil:
		return s, errors.New(`no "correct": the harness must say whether the node's result is right`)
	case s.Input == "" || len(s.Input) > MaxInputBytes || !utf8.ValidString(s.Input):
		return s, fmt.Errorf("input %q: empty, over %d bytes or not UTF-8", textcut.Head(s.Input, 40), MaxInputBytes)
	case s.Repeat < 0:
		return s, fmt.Errorf("repeat %d: below 0", s.Repeat)
	case len(s.Note) > MaxNoteBytes || !utf8.ValidString(s.Note) || len(s.Unit) > 40 || !utf8.ValidString(s.Unit):
		return s, errors.New("note or unit over its bound or not UTF-8")
	}
	s.Correct = *raw.Correct
	for name, v := range map[string]*float64{"error": s.Error, "tolerance": s.Tolerance, "metric": s.Metric} {
		if v != nil && (math.IsNaN(*v) || math.IsInf(*v, 0)) {
			return s, fmt.Errorf("%s is not a finite number", name)
		}
	}
	return s, nil
}
