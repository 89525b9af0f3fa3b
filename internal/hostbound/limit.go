package hostbound

import (
	"fmt"
	"math"
	"strings"

	"github.com/hpcq/hpcq/pkg/schema"
)

// Bounds a metric may state (run.yaml metric.bound).
const (
	// BoundAuto (unset): BoundFlops when the metric's unit is a FLOP/s
	// unit, else none.
	BoundAuto = ""
	BoundNone = "none"
	// BoundFlops: the host's peak double-precision FLOP/s.
	BoundFlops = "flops"
	// BoundBandwidth: BandwidthMargin times the host's measured triad.
	BoundBandwidth = "bandwidth"
	// BoundRoofline: min(peak, intensity x bandwidth bound), a FLOP/s unit.
	BoundRoofline = "roofline"
)

// BandwidthMargin multiplies the measured triad into a bandwidth limit:
// a measured figure is below the host's true peak (STREAM reaches 60-90%
// of it), and a working set partly in cache streams faster than memory.
const BandwidthMargin = 2.0

// Rate is a unit of a rate: what it counts and its scale (a GFLOP/s is
// 1e9 FLOP/s; a GiB/s 2^30 bytes a second).
type Rate struct {
	Flops bool // FLOP/s; else bytes a second
	Scale float64
}

// ParseRate reads a unit of FLOP/s ("GFLOP/s", "Gflop/s", "GFLOPS",
// "TFLOP/s") or of bytes a second ("GB/s", "GiB/s", "MB/s", "GBps"; "Gb/s"
// is bits); ok false for any other unit.
func ParseRate(unit string) (r Rate, ok bool) {
	s := strings.ReplaceAll(strings.TrimSpace(unit), " ", "")
	low := strings.ToLower(s)
	var base string
	switch {
	case strings.HasSuffix(low, "/s"), strings.HasSuffix(low, "/sec"):
		base = s[:strings.LastIndex(s, "/")]
	case strings.HasSuffix(low, "flops"):
		base = s[:len(s)-1]
	case strings.HasSuffix(low, "ps") && len(s) > 2 && strings.EqualFold(s[len(s)-3:len(s)-2], "b"):
		base = s[:len(s)-2]
	default:
		return r, false
	}
	var prefix string
	switch lb := strings.ToLower(base); {
	case strings.HasSuffix(lb, "flop"):
		r.Flops, prefix = true, base[:len(base)-4]
		r.Scale, ok = decimal(strings.ToUpper(prefix))
		return r, ok
	case strings.HasSuffix(base, "B"):
		prefix, r.Scale = base[:len(base)-1], 1
	case strings.HasSuffix(base, "b"):
		prefix, r.Scale = base[:len(base)-1], 1.0/8
	default:
		return r, false
	}
	if p, bin := strings.CutSuffix(prefix, "i"); bin {
		exp := strings.Index("KMGTP", strings.ToUpper(p))
		if len(p) != 1 || exp < 0 {
			return r, false
		}
		r.Scale *= math.Pow(1024, float64(exp+1))
		return r, true
	}
	if prefix == "K" {
		prefix = "k"
	}
	d, ok := decimal(prefix)
	r.Scale *= d
	return r, ok
}

// decimal is an SI prefix's factor ("" 1, k 1e3 ... P 1e15).
func decimal(p string) (float64, bool) {
	i := strings.Index("kMGTP", p)
	switch {
	case p == "":
		return 1, true
	case len(p) != 1 || i < 0:
		if p == "K" {
			return 1e3, true
		}
		return 0, false
	}
	return math.Pow(1000, float64(i+1)), true
}

// FlopsUnit: unit is one of FLOP/s (the peak bounds it by default).
func FlopsUnit(unit string) bool {
	r, ok := ParseRate(unit)
	return ok && r.Flops
}

// timeUnits are the durations a metric or a paper writes, in seconds.
var timeUnits = map[string]float64{"s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1, "ms": 1e-3, "msec": 1e-3,
	"millisecond": 1e-3, "milliseconds": 1e-3, "us": 1e-6, "µs": 1e-6, "microseconds": 1e-6, "ns": 1e-9, "nanoseconds": 1e-9,
	"min": 60, "mins": 60, "minute": 60, "minutes": 60, "h": 3600, "hour": 3600, "hours": 3600}

// ParseTime reads a unit of time ("s", "ms", "seconds"; a word of four
// letters or more in any case): its length in seconds.
func ParseTime(unit string) (seconds float64, ok bool) {
	u := strings.TrimSpace(unit)
	if s, ok := timeUnits[u]; ok {
		return s, true
	}
	if s, ok := timeUnits[strings.ToLower(u)]; ok && len(u) > 3 {
		return s, true
	}
	return 0, false
}

// Timed: unit is a time or a rate (s, ms, GFLOP/s, GB/s, MLUP/s): a
// timing, and noisy.
func Timed(unit string) bool {
	u := strings.TrimSpace(unit)
	_, t := ParseTime(strings.ToLower(u))
	_, rate := ParseRate(u)
	return t || rate || strings.Contains(u, "/s")
}

// Metric is what a run says of its metric's bound.
type Metric struct {
	Bound string
	// Intensity is a roofline's FLOP per byte moved from memory.
	Intensity float64
	Unit      string
}

// Check says whether m can be judged: its bound known, its unit of the
// kind the bound is (for run.yaml's validation).
func (m Metric) Check() error {
	r, ok := ParseRate(m.Unit)
	switch m.Bound {
	case BoundAuto, BoundNone:
		return nil
	case BoundFlops, BoundRoofline:
		if !ok || !r.Flops {
			return fmt.Errorf("%s needs a unit of FLOP/s (GFLOP/s, MFLOP/s, TFLOP/s), not %q", m.Bound, m.Unit)
		}
		if m.Bound == BoundRoofline && (!(m.Intensity > 0) || math.IsInf(m.Intensity, 0)) {
			return fmt.Errorf("roofline needs metric.intensity: the FLOP per byte of memory traffic, > 0")
		}
	case BoundBandwidth:
		if !ok || r.Flops {
			return fmt.Errorf("bandwidth needs a unit of bytes a second (GB/s, GiB/s, MB/s), not %q", m.Unit)
		}
	default:
		return fmt.Errorf("%q: one of flops, bandwidth, roofline or none", m.Bound)
	}
	return nil
}

// Limit is a metric's highest possible value on a host, in its unit.
type Limit struct {
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	// How says what it is made of.
	How string `json:"how"`
}

// LimitOf is m's limit on b; ok false when m states none (or its unit is
// not a rate for BoundAuto), when b is nil, or when it needs a bandwidth
// not yet measured.
func LimitOf(b *schema.HostBound, m Metric) (Limit, bool) {
	r, rate := ParseRate(m.Unit)
	kind := m.Bound
	if kind == BoundAuto {
		if !rate || !r.Flops {
			return Limit{}, false
		}
		kind = BoundFlops
	}
	if b == nil || !rate || m.Check() != nil {
		return Limit{}, false
	}
	peak := b.PeakGFLOPS * 1e9
	bw := BandwidthMargin * b.TriadGBs * 1e9
	switch kind {
	case BoundFlops:
		return Limit{peak / r.Scale, m.Unit, "peak: " + b.PeakHow}, true
	case BoundBandwidth:
		if bw == 0 {
			return Limit{}, false
		}
		return Limit{bw / r.Scale, m.Unit, fmt.Sprintf("%.3g x the measured %.3g GB/s (%s)", BandwidthMargin, b.TriadGBs, b.TriadHow)}, true
	case BoundRoofline:
		if bw == 0 || peak < m.Intensity*bw {
			return Limit{peak / r.Scale, m.Unit, "peak: " + b.PeakHow}, true
		}
		return Limit{m.Intensity * bw / r.Scale, m.Unit, fmt.Sprintf("roofline: %.3g FLOP/byte x %.3g x the measured %.3g GB/s", m.Intensity,
			BandwidthMargin, b.TriadGBs)}, true
	}
	return Limit{}, false
}
