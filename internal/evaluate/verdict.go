package evaluate

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/hpcq/hpcq/pkg/schema"
)

// Verdict is what a report says of a node.
type Verdict struct {
	// Correct: every input asked for has a repeat, and every repeat of
	// every input was correct. Otherwise Reason says why, in the
	// harness's words, for the node's debug prompt.
	Correct bool
	Reason  string
	// Incomplete: the report lacks an input asked for, or says nothing:
	// the harness did not do its part, which is no verdict on the node.
	Incomplete bool
	// Metric is the node's metric as the harness measured it: the median
	// of an input's kept repeats, and over several inputs their geometric
	// mean (their arithmetic mean when one is not above 0). Set only when
	// Correct.
	Metric float64
	Unit   string
	// PerInput is each input's median, in the order asked.
	PerInput []InputMetric
	// Kept are the repeats the metric is made of (warm-ups left out).
	Kept int
	// Spread is the metric's noise (nil with fewer than 2 repeats of an
	// input): its quartiles and 95% bootstrap interval.
	Spread *schema.Spread
}

// InputMetric is one input's median over its kept repeats.
type InputMetric struct {
	Input  string
	Median float64
	N      int
}

// Judge makes the verdict of a report on the inputs asked for (none:
// those the report names, in its order).
func Judge(samples []schema.EvalSample, inputs []string) Verdict {
	if len(inputs) == 0 {
		for _, s := range samples {
			if !slices.Contains(inputs, s.Input) {
				inputs = append(inputs, s.Input)
			}
		}
	}
	if len(inputs) == 0 {
		return Verdict{Reason: "the evaluation reported nothing: no input was measured", Incomplete: true}
	}
	byInput := map[string][]float64{}
	var v Verdict
	for _, s := range samples {
		if !s.Correct {
			return Verdict{Reason: incorrect(s)}
		}
		if !slices.Contains(inputs, s.Input) {
			continue // a harness may check more than it was asked; only what was asked counts
		}
		if v.Unit == "" {
			v.Unit = s.Unit
		}
		if s.Repeat > 0 {
			if s.Metric == nil {
				return Verdict{Reason: fmt.Sprintf(`repeat %d of input %s is correct and has no "metric": the harness measures the metric itself`, s.Repeat, s.Input),
					Incomplete: true}
			}
			byInput[s.Input] = append(byInput[s.Input], *s.Metric)
		}
	}
	for _, in := range inputs {
		ms := byInput[in]
		if len(ms) == 0 {
			return Verdict{Reason: fmt.Sprintf("the evaluation reported no measured repeat of input %s", in), Incomplete: true}
		}
		v.PerInput = append(v.PerInput, InputMetric{Input: in, Median: median(ms), N: len(ms)})
		v.Kept += len(ms)
	}
	v.Metric = combine(v.PerInput)
	if math.IsInf(v.Metric, 0) || math.IsNaN(v.Metric) {
		return Verdict{Reason: "the metric over the inputs is not a finite number (the harness's values are out of range)"}
	}
	v.Spread = spread(inputs, byInput)
	v.Correct = true
	return v
}

// Check is the verdict of a correctness-only pass (the quick stage): every
// input asked for has a line, every line is correct; no metric is made.
func Check(samples []schema.EvalSample, inputs []string) Verdict {
	seen := map[string]bool{}
	for _, s := range samples {
		if !s.Correct {
			return Verdict{Reason: incorrect(s)}
		}
		seen[s.Input] = true
	}
	for _, in := range inputs {
		if !seen[in] {
			return Verdict{Reason: "the quick evaluation reported nothing of input " + in, Incomplete: true}
		}
	}
	return Verdict{Correct: true}
}

// incorrect is why a repeat failed its check, for the debug prompt:
// "incorrect: error 3.1e-02 > 1e-06 on N=1000 (note)".
func incorrect(s schema.EvalSample) string {
	r := "incorrect"
	switch {
	case s.Error != nil && s.Tolerance != nil:
		r += fmt.Sprintf(": error %.3g > %.3g", *s.Error, *s.Tolerance)
	case s.Error != nil:
		r += fmt.Sprintf(": error %.3g", *s.Error)
	}
	r += " on " + s.Input
	if s.Repeat > 0 {
		r += " (repeat " + strconv.Itoa(s.Repeat) + ")"
	}
	if s.Note != "" {
		r += ": " + s.Note
	}
	return r
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return s[n/2-1]/2 + s[n/2]/2 // halves first: two values near the largest float do not overflow
}

// combine is the metric over the inputs: one input's median as it is; the
// geometric mean of several (sizes weigh alike whatever their scale), the
// arithmetic mean when one is not above 0.
func combine(per []InputMetric) float64 {
	if len(per) == 1 {
		return per[0].Median
	}
	logSum, mean, positive, same := 0.0, 0.0, true, true
	for i, p := range per {
		same = same && p.Median == per[0].Median
		mean += (p.Median - mean) / float64(i+1)
		if p.Median <= 0 {
			positive = false
		} else {
			logSum += math.Log(p.Median)
		}
	}
	switch {
	case same:
		return per[0].Median // as it is, not through exp(log(x)) (977, not 976.9999999999995)
	case !positive:
		return mean
	}
	return math.Exp(logSum / float64(len(per)))
}
