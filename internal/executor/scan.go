package executor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/hpcq/hpcq/internal/textcut"
	"github.com/hpcq/hpcq/pkg/schema"
)

// maxLine bounds the bytes of one line a scanner looks at; the rest of a
// longer line is skipped.
const maxLine = 64 << 10

// lineWriter calls fn for each complete line written to it (without the
// newline), and for the last partial line on Close. It keeps at most
// maxLine bytes of a line, so its memory is bounded whatever is written.
type lineWriter struct {
	fn   func(string)
	buf  []byte
	long bool // the current line exceeded maxLine
}

func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if room := maxLine - len(w.buf); room > 0 {
			w.buf = append(w.buf, chunk[:min(room, len(chunk))]...)
		}
		if len(chunk) > maxLine-len(w.buf) {
			w.long = true
		}
		if i < 0 {
			break
		}
		w.fn(strings.TrimSuffix(string(w.buf), "\r"))
		w.buf, w.long = w.buf[:0], false
		p = p[i+1:]
	}
	return n, nil
}

// Close flushes a last line that has no newline.
func (w *lineWriter) Close() error {
	if len(w.buf) > 0 {
		w.fn(strings.TrimSuffix(string(w.buf), "\r"))
		w.buf = w.buf[:0]
	}
	return nil
}

// Metric sources, in order of precedence.
const (
	sourceFile    = "metrics.json"
	sourceLine    = "METRIC line"
	sourcePattern = "metric_patterns"
)

// metrics collects a run's metrics from its sources and the problems met.
type metrics struct {
	mu       sync.Mutex
	values   map[string]float64
	units    map[string]string
	source   map[string]string
	bad      []string
	patterns []compiledPattern
	// pending values of patterns: the last match of each wins.
	patternVals map[string]string
}

type compiledPattern struct {
	schema.MetricPattern
	re *regexp.Regexp
}

// maxBadMetrics bounds the problems kept.
const maxBadMetrics = 10

func newMetrics(patterns []schema.MetricPattern) (*metrics, error) {
	m := &metrics{values: map[string]float64{}, units: map[string]string{}, source: map[string]string{}, patternVals: map[string]string{}}
	for _, p := range patterns {
		re, err := regexp.Compile(p.Regex)
		if err != nil {
			return nil, fmt.Errorf("metric pattern %s: %w", p.Name, err)
		}
		m.patterns = append(m.patterns, compiledPattern{p, re})
	}
	return m, nil
}

func (m *metrics) badf(format string, args ...any) {
	if len(m.bad) < maxBadMetrics {
		m.bad = append(m.bad, fmt.Sprintf(format, args...))
	}
}

// set records a value unless a source of higher precedence gave one.
func (m *metrics) set(name, raw, unit, source string) {
	if err := schema.CheckMetricName(name); err != nil {
		m.badf("%s: %v", source, err)
		return
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		m.badf("%s: metric %s: %q is not a finite number", source, name, raw)
		return
	}
	if prev, ok := m.source[name]; ok && rank(prev) < rank(source) {
		return
	}
	m.values[name], m.source[name] = v, source
	if unit != "" {
		m.units[name] = unit
	} else {
		delete(m.units, name)
	}
}

func rank(source string) int {
	switch source {
	case sourceFile:
		return 0
	case sourceLine:
		return 1
	}
	return 2
}

var metricLine = regexp.MustCompile(`^METRIC\s+([^=\s]+)=(\S+)(?:\s+(.*\S))?\s*$`)

// rankTag is the prefix an MPI launcher puts before each line of a rank's
// output: Open MPI's --tag-output ("[1,0]<stdout>:"), MPICH's -prepend-rank
// ("[0] "), srun's --label ("0: "). A METRIC line after it counts.
var rankTag = regexp.MustCompile(`^(?:\[\d+,\d+\]<stdout>:|\[\d+\] |\s*\d+: )`)

// stdoutLine looks at one line of the run's standard output.
func (m *metrics) stdoutLine(line string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(line) > 0 && (line[0] == '[' || line[0] == ' ' || line[0] >= '0' && line[0] <= '9') {
		if tag := rankTag.FindString(line); tag != "" && strings.HasPrefix(line[len(tag):], "METRIC") {
			line = line[len(tag):]
		}
	}
	if strings.HasPrefix(line, "METRIC") && (len(line) == 6 || line[6] == ' ' || line[6] == '\t') {
		sub := metricLine.FindStringSubmatch(line)
		if sub == nil {
			m.badf("%s: %q is not METRIC name=value [unit]", sourceLine, textcut.Head(line, 200))
		} else {
			m.set(sub[1], sub[2], sub[3], sourceLine)
		}
	}
	for _, p := range m.patterns {
		if sub := p.re.FindStringSubmatch(line); sub != nil {
			m.patternVals[p.Name] = sub[1]
		}
	}
}

// file reads a metrics.json: an object of name -> number, or name ->
// {"value": number, "unit": "..."}.
func (m *metrics) file(data []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil {
		m.badf("%s: not a JSON object: %v", sourceFile, err)
		return
	}
	names := make([]string, 0, len(obj))
	for k := range obj {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		raw := bytes.TrimSpace(obj[name])
		var unit string
		if len(raw) > 0 && raw[0] == '{' {
			var v struct {
				Value json.RawMessage `json:"value"`
				Unit  string          `json:"unit"`
			}
			if err := json.Unmarshal(raw, &v); err != nil || v.Value == nil {
				m.badf("%s: metric %s: %s is not a number or {\"value\": number, \"unit\": ...}", sourceFile, name, textcut.Head(string(raw), 200))
				continue
			}
			raw, unit = bytes.TrimSpace(v.Value), v.Unit
		}
		if len(raw) == 0 || !(raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
			m.badf("%s: metric %s: %s is not a number", sourceFile, name, textcut.Head(string(raw), 200))
			continue
		}
		m.set(name, string(raw), unit, sourceFile)
	}
}

// finish applies the patterns' last matches and returns what was found.
func (m *metrics) finish() (values map[string]float64, units map[string]string, bad []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.patterns {
		if raw, ok := m.patternVals[p.Name]; ok {
			m.set(p.Name, raw, p.Unit, sourcePattern)
		}
	}
	if len(m.values) == 0 {
		m.values = nil
	}
	if len(m.units) == 0 {
		m.units = nil
	}
	return m.values, m.units, m.bad
}

// Diagnostics.

// maxDiagnostics bounds the diagnostics kept from a compile.
const maxDiagnostics = 50

var (
	// gcc, clang, g++, gfortran with a column on one line, mpicc (wraps gcc).
	diagGCC = regexp.MustCompile(`^([^\s:][^:]*):(\d+):(?:(\d+):)?\s*(fatal error|error|warning|Error|Warning):\s*(.*)$`)
	// nvcc / EDG front ends: file(line): error: message
	diagNVCC = regexp.MustCompile(`^(.+?)\((\d+)\):\s*(error|warning)[^:]*:\s*(.*)$`)
	// gfortran: a location line, then the message a few lines later.
	diagFortranLoc = regexp.MustCompile(`^([^\s:][^:]*):(\d+):(\d+):$`)
	diagFortranMsg = regexp.MustCompile(`^(Error|Fatal Error|Warning):\s*(.*)$`)
	// driver and linker: "gcc: error: x.c: No such file", "collect2: error: ld returned 1"
	diagTool = regexp.MustCompile(`^([A-Za-z0-9_.+/-]+):\s*(fatal error|error):\s*(.*)$`)
	// ld: "/usr/bin/ld: main.c:(.text+0x5): undefined reference to `f'"
	diagLD = regexp.MustCompile(`^(?:\S*/)?ld(?:\.\w+)?: (.*)$`)
)

// diagnostics collects compiler messages from both output streams.
type diagnostics struct {
	mu      sync.Mutex
	list    []schema.Diagnostic
	pending *schema.Diagnostic // gfortran location awaiting its message
}

func (d *diagnostics) add(x schema.Diagnostic) {
	if len(d.list) < maxDiagnostics {
		x.Message = textcut.Head(strings.TrimSpace(x.Message), 500)
		d.list = append(d.list, x)
	}
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

func (d *diagnostics) line(line string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.pending != nil && diagFortranMsg.MatchString(line):
		sub := diagFortranMsg.FindStringSubmatch(line)
		x := *d.pending
		d.pending = nil
		x.Severity, x.Message = strings.ToLower(sub[1]), sub[2]
		d.add(x)
	case diagFortranLoc.MatchString(line):
		sub := diagFortranLoc.FindStringSubmatch(line)
		d.pending = &schema.Diagnostic{File: sub[1], Line: atoi(sub[2]), Column: atoi(sub[3])}
	case diagGCC.MatchString(line):
		sub := diagGCC.FindStringSubmatch(line)
		d.add(schema.Diagnostic{File: sub[1], Line: atoi(sub[2]), Column: atoi(sub[3]), Severity: strings.ToLower(sub[4]), Message: sub[5]})
	case diagNVCC.MatchString(line):
		sub := diagNVCC.FindStringSubmatch(line)
		d.add(schema.Diagnostic{File: sub[1], Line: atoi(sub[2]), Severity: sub[3], Message: sub[4]})
	case diagLD.MatchString(line):
		sub := diagLD.FindStringSubmatch(line)
		d.add(schema.Diagnostic{File: "ld", Severity: "error", Message: sub[1]})
	case diagTool.MatchString(line):
		sub := diagTool.FindStringSubmatch(line)
		d.add(schema.Diagnostic{File: sub[1], Severity: sub[2], Message: sub[3]})
	}
}

// errorsFirst returns the diagnostics with errors before warnings, each in
// the order they came.
func (d *diagnostics) errorsFirst() []schema.Diagnostic {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]schema.Diagnostic, 0, len(d.list))
	for _, x := range d.list {
		if x.Severity != "warning" {
			out = append(out, x)
		}
	}
	for _, x := range d.list {
		if x.Severity == "warning" {
			out = append(out, x)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
