package evaluate

import (
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/schema"
)

func TestParseReport(t *testing.T) {
	t.Parallel()
	r := `{"input": "N=1000", "repeat": 0, "correct": true, "metric": 9}
{"input": "N=1000", "repeat": 1, "correct": true, "error": 2.1e-12, "tolerance": 1e-9, "metric": 14.2, "unit": "GFLOP/s"}

{"input": "N=1000", "repeat": 2, "correct": true, "metric": 15.0, "unit": "GFLOP/s"}
`
	s, err := ParseReport([]byte(r))
	require.NoError(t, err)
	require.Len(t, s, 3)
	require.Equal(t, 14.2, *s[1].Metric)
	require.Equal(t, 1e-9, *s[1].Tolerance)

	for bad, why := range map[string]string{
		`{"input": "N=1", "repeat": 1, "metric": 3}`:                      `no "correct"`,
		`{"input": "N=1", "repeat": 1, "corect": true, "metric": 3}`:      `unknown field "corect"`,
		`{"input": "", "repeat": 1, "correct": true, "metric": 3}`:        "input",
		`{"input": "N=1", "repeat": -1, "correct": true, "metric": 3}`:    "below 0",
		`{"input": "N=1", "repeat": 1, "correct": true, "metric": 1e999}`: "not a report line",
		`METRIC gflops=12`: "not a report line",
		`{"input": "N=1", "repeat": 1, "correct": true, "metric": 3} {"x": 1}`: "more than one value",
	} {
		_, err := ParseReport([]byte(bad))
		require.ErrorIs(t, err, ErrReport, bad)
		require.ErrorContains(t, err, why, bad)
		require.ErrorContains(t, err, "line 1", bad)
	}
	_, err = ParseReport([]byte(strings.Repeat("x", MaxReportBytes+1)))
	require.ErrorContains(t, err, "more than")
}

func ptr(v float64) *float64 { return &v }

// TestJudge: the verdict of the program that lies (a metric without the
// work: its result is wrong), of the one right only for the size searched,
// and of the one really faster.
func TestJudge(t *testing.T) {
	t.Parallel()
	ok := func(in string, rep int, m float64) schema.EvalSample {
		return schema.EvalSample{Input: in, Repeat: rep, Correct: true, Metric: ptr(m), Unit: "GFLOP/s"}
	}
	// Really faster: every repeat right; warm-up left out; median per
	// input, geometric mean over inputs.
	v := Judge([]schema.EvalSample{ok("N=1000", 0, 1), ok("N=1000", 1, 10), ok("N=1000", 2, 12), ok("N=1000", 3, 11),
		ok("N=1531", 1, 40), ok("N=1531", 2, 40)}, []string{"N=1000", "N=1531"})
	require.True(t, v.Correct, v.Reason)
	require.InDelta(t, math.Sqrt(11*40), v.Metric, 1e-9)
	require.Equal(t, 5, v.Kept)
	require.Equal(t, "GFLOP/s", v.Unit)

	// The liar: prints a fine number, computes nothing.
	lie := schema.EvalSample{Input: "N=1000", Repeat: 1, Correct: false, Error: ptr(3.1e-2), Tolerance: ptr(1e-6), Note: "grid untouched"}
	v = Judge([]schema.EvalSample{ok("N=1000", 0, 5000), lie}, []string{"N=1000"})
	require.False(t, v.Correct)
	require.Equal(t, "incorrect: error 0.031 > 1e-06 on N=1000 (repeat 1): grid untouched", v.Reason)
	require.Zero(t, v.Metric, "an incorrect node has no metric")

	// Right only for the size searched: the other input fails its check.
	v = Judge([]schema.EvalSample{ok("N=1024", 1, 30), {Input: "N=1531", Repeat: 1, Correct: false, Error: ptr(0.5)}}, []string{"N=1024", "N=1531"})
	require.False(t, v.Correct)
	require.Equal(t, "incorrect: error 0.5 on N=1531 (repeat 1)", v.Reason)

	// An input asked for and not measured; nothing at all.
	v = Judge([]schema.EvalSample{ok("N=1000", 1, 3)}, []string{"N=1000", "N=2000"})
	require.Equal(t, "the evaluation reported no measured repeat of input N=2000", v.Reason)
	require.True(t, v.Incomplete, "the harness's fault, not the node's")
	require.False(t, Judge(nil, nil).Correct)
	require.True(t, Judge(nil, nil).Incomplete)
	v = Judge([]schema.EvalSample{{Input: "N=1", Repeat: 1, Correct: true}}, nil)
	require.True(t, v.Incomplete)
	require.Contains(t, v.Reason, `has no "metric"`)
	// The quick pass: correctness only, no metric asked.
	require.True(t, Check([]schema.EvalSample{{Input: "N=8", Repeat: 1, Correct: true}}, []string{"N=8"}).Correct)
	v = Check([]schema.EvalSample{{Input: "N=8", Repeat: 1, Correct: false, Note: "off by one"}}, []string{"N=8"})
	require.Equal(t, "incorrect on N=8 (repeat 1): off by one", v.Reason)
	require.True(t, Check(nil, []string{"N=8"}).Incomplete)
	// A metric not above 0 over several inputs: the arithmetic mean.
	v = Judge([]schema.EvalSample{ok("a", 1, 0), ok("b", 1, 4)}, nil)
	require.True(t, v.Correct)
	require.Equal(t, 2.0, v.Metric)
}

// FuzzParseReport: any bytes give samples within the contract or an
// ErrReport naming a line; never a panic, never a sample that breaks it.
func FuzzParseReport(f *testing.F) {
	for _, s := range []string{
		`{"input": "N=1000", "repeat": 1, "correct": true, "metric": 14.2}`,
		`{"input": "N=1", "repeat": 0, "correct": false, "error": 0.5, "tolerance": 1e-6, "note": "é"}` + "\n\n",
		`{"input": "\u001b[2J", "repeat": 1, "correct": true, "metric": -0}`,
		"{\"input\": \"\xff\", \"repeat\": 1, \"correct\": true, \"metric\": 1}",
		`[1,2]`, `null`, `{"input": "a", "repeat": 1e3, "correct": true, "metric": 1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		samples, err := ParseReport(data)
		if err != nil {
			require.ErrorIs(t, err, ErrReport)
			return
		}
		for _, s := range samples {
			if s.Input == "" || len(s.Input) > MaxInputBytes || !utf8.ValidString(s.Input) || s.Repeat < 0 {
				t.Fatalf("sample out of the contract: %+v", s)
			}
			if s.Metric != nil && (math.IsNaN(*s.Metric) || math.IsInf(*s.Metric, 0)) {
				t.Fatalf("a metric that is not a finite number: %+v", s)
			}
		}
		v := Judge(samples, nil)
		if v.Correct && (math.IsNaN(v.Metric) || math.IsInf(v.Metric, 0)) {
			t.Fatalf("verdict metric %v", v.Metric)
		}
	})
}

// TestSpread: repeated measurements give the metric's quartiles and a 95%
// bootstrap interval around it, the same for the same report; one repeat
// an input gives none (one sample has no spread to tell).
func TestSpread(t *testing.T) {
	var samples []schema.EvalSample
	for i, v := range []float64{10, 11, 9, 10.5, 9.5} {
		m := v
		samples = append(samples, schema.EvalSample{Input: "N=1000", Repeat: i + 1, Correct: true, Metric: &m})
	}
	v := Judge(samples, []string{"N=1000"})
	require.True(t, v.Correct)
	require.Equal(t, 10.0, v.Metric)
	s := v.Spread
	require.NotNil(t, s)
	require.Equal(t, 9.5, s.Q1)
	require.Equal(t, 10.5, s.Q3)
	require.Equal(t, 1.0, s.IQR())
	require.Equal(t, 5, s.N)
	require.LessOrEqual(t, s.Low, v.Metric)
	require.GreaterOrEqual(t, s.High, v.Metric)
	require.GreaterOrEqual(t, s.Low, 9.0)
	require.LessOrEqual(t, s.High, 11.0)
	require.Equal(t, s, Judge(samples, []string{"N=1000"}).Spread, "the same report, the same interval")

	one := 7.0
	v = Judge([]schema.EvalSample{{Input: "N=1", Repeat: 1, Correct: true, Metric: &one}}, nil)
	require.True(t, v.Correct)
	require.Nil(t, v.Spread)

	// Two inputs: the quartiles combined as the metric is (geometric mean).
	var two []schema.EvalSample
	for i, v := range []float64{4, 4, 4} {
		a, b := v, 4*v
		two = append(two, schema.EvalSample{Input: "a", Repeat: i + 1, Correct: true, Metric: &a}, schema.EvalSample{Input: "b", Repeat: i + 1, Correct: true, Metric: &b})
	}
	v = Judge(two, []string{"a", "b"})
	require.InDelta(t, 8.0, v.Metric, 1e-12)
	require.InDelta(t, 8.0, v.Spread.Low, 1e-12, "no noise: a point interval")
	require.InDelta(t, 8.0, v.Spread.High, 1e-12)
}
