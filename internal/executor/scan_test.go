package executor

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/schema"
)

func TestLineWriter(t *testing.T) {
	var got []string
	w := &lineWriter{fn: func(s string) { got = append(got, s) }}
	_, _ = w.Write([]byte("a\nb"))
	_, _ = w.Write([]byte("c\r\n\n"))
	_, _ = w.Write([]byte(strings.Repeat("x", maxLine+10) + "\nshort"))
	_ = w.Close()
	require.Equal(t, []string{"a", "bc", "", strings.Repeat("x", maxLine), "short"}, got)
	require.LessOrEqual(t, cap(w.buf), 2*maxLine, "a long line does not grow the buffer without bound")
}

func TestMetricsSourcesAndPrecedence(t *testing.T) {
	m, err := newMetrics([]schema.MetricPattern{
		{Name: "gflops", Regex: `GFLOP/s: ([0-9.eE+-]+)`, Unit: "GFLOP/s"},
		{Name: "time_s", Regex: `took ([0-9.]+) s`},
	})
	require.NoError(t, err)
	for _, l := range []string{
		"METRIC time_s=2.5 s",
		"METRIC mlups=100",
		"GFLOP/s: 1.0",
		"GFLOP/s: 3.5",    // the last match wins
		"took 9 s",        // the METRIC line has precedence over a pattern
		"METRICS are fun", // not a METRIC line
	} {
		m.stdoutLine(l)
	}
	m.file([]byte(`{"mlups": {"value": 120.5, "unit": "MLUP/s"}, "threads": 2}`))
	vals, units, bad := m.finish()
	require.Empty(t, bad)
	require.Equal(t, map[string]float64{"time_s": 2.5, "mlups": 120.5, "gflops": 3.5, "threads": 2}, vals)
	require.Equal(t, map[string]string{"time_s": "s", "mlups": "MLUP/s", "gflops": "GFLOP/s"}, units)
}

// TestRankTaggedMetrics: a METRIC line an MPI launcher tagged with its rank
// (Open MPI --tag-output, MPICH -prepend-rank, srun --label) counts; other
// tagged lines and look-alikes do not.
func TestRankTaggedMetrics(t *testing.T) {
	m, err := newMetrics(nil)
	require.NoError(t, err)
	for _, l := range []string{"[1,0]<stdout>:METRIC mlups=31.4 MLUP/s", "[3] METRIC ranks=4", " 0: METRIC gflops=2.5",
		"[1,1]<stdout>:rank 1 of 4 on compute1", "[1,0]<stderr>:METRIC leaked=1", "12 METRIC nope=1", "[x] METRIC nope2=1"} {
		m.stdoutLine(l)
	}
	vals, units, bad := m.finish()
	require.Empty(t, bad)
	require.Equal(t, map[string]float64{"mlups": 31.4, "ranks": 4, "gflops": 2.5}, vals)
	require.Equal(t, "MLUP/s", units["mlups"])
}

func TestBadMetrics(t *testing.T) {
	m, err := newMetrics(nil)
	require.NoError(t, err)
	m.stdoutLine("METRIC speed=fast")
	m.stdoutLine("METRIC nan=NaN")
	m.stdoutLine("METRIC inf=+Inf")
	m.stdoutLine("METRIC broken")
	m.stdoutLine("METRIC bad name=1")
	m.file([]byte(`{"ok": 1, "word": "high", "nested": {"unit": "s"}}`))
	vals, _, bad := m.finish()
	require.Equal(t, map[string]float64{"ok": 1}, vals)
	joined := strings.Join(bad, "\n")
	for _, want := range []string{`metric speed: "fast" is not a finite number`, `metric nan: "NaN"`, `metric inf: "+Inf"`,
		`"METRIC broken" is not METRIC name=value [unit]`, `metric word: "high" is not a number`, `metric nested:`} {
		require.Contains(t, joined, want)
	}
	m2, _ := newMetrics(nil)
	m2.file([]byte(`[1,2]`))
	_, _, bad = m2.finish()
	require.Contains(t, bad[0], "metrics.json: not a JSON object")
}

func TestDiagnostics(t *testing.T) {
	d := &diagnostics{}
	for _, l := range strings.Split(`src/main.c: In function 'main':
src/main.c:5:12: warning: unused variable 'x' [-Wunused-variable]
src/main.c:7:5: error: 'y' undeclared (first use in this function)
src/main.c:7:5: note: each undeclared identifier is reported only once
kernel.cu(42): error: identifier "foo" is undefined
hello.f90:3:7:

    3 |   print *, x y
      |       1
Error: Syntax error in PRINT statement at (1)
/usr/bin/ld: /tmp/cc1.o: in function 'main':
collect2: error: ld returned 1 exit status
gcc: fatal error: no input files`, "\n") {
		d.line(l)
	}
	got := d.errorsFirst()
	require.Equal(t, []schema.Diagnostic{
		{File: "src/main.c", Line: 7, Column: 5, Severity: "error", Message: "'y' undeclared (first use in this function)"},
		{File: "kernel.cu", Line: 42, Severity: "error", Message: `identifier "foo" is undefined`},
		{File: "hello.f90", Line: 3, Column: 7, Severity: "error", Message: "Syntax error in PRINT statement at (1)"},
		{File: "ld", Severity: "error", Message: "/tmp/cc1.o: in function 'main':"},
		{File: "collect2", Severity: "error", Message: "ld returned 1 exit status"},
		{File: "gcc", Severity: "fatal error", Message: "no input files"},
		{File: "src/main.c", Line: 5, Column: 12, Severity: "warning", Message: "unused variable 'x' [-Wunused-variable]"},
	}, got)
}

// FuzzOutputScanners: program output of any shape never panics the metric
// and diagnostic parsers, and whatever metric they accept is finite and
// well named.
func FuzzOutputScanners(f *testing.F) {
	for _, s := range []string{"METRIC a=1 s", "METRIC =", "METRIC a==1", "x.c:1:2: error: y", "k.cu(9): error: z", "a:1:1:\nError: q",
		"METRIC a=1e999", "METRIC a=0x10", "\x00METRIC a=1", "METRIC \xff=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		m, _ := newMetrics([]schema.MetricPattern{{Name: "p", Regex: `v=(\S+)`}})
		d := &diagnostics{}
		lw := &lineWriter{fn: func(s string) { m.stdoutLine(s); d.line(s) }}
		_, _ = lw.Write([]byte(out))
		_ = lw.Close()
		m.file([]byte(out))
		vals, _, _ := m.finish()
		for k, v := range vals {
			if err := schema.CheckMetricName(k); err != nil {
				t.Fatalf("accepted metric name %q: %v", k, err)
			}
			r := &schema.NodeResult{V: 1, RunID: "r", NodeID: "n", Attempt: 1, Worker: "w", Metrics: map[string]float64{k: v}}
			if err := r.Validate(); err != nil {
				t.Fatalf("accepted metric makes an invalid result: %v", err)
			}
		}
		_ = d.errorsFirst()
	})
}
