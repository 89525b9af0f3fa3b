// Package hostbound is what a host can do at most: its peak
// double-precision FLOP/s from its CPUs, clock and vector units, and its
// memory bandwidth from a STREAM-triad probe, measured once per host and
// cached; and a metric's limit on it (docs/evaluation.md, "The machine's
// bound"). A worker attaches its host's bound to every result; the
// scheduler finds a metric beyond it impossible.
package hostbound

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// turboAllowance multiplies a clock read from /proc/cpuinfo's "cpu MHz"
// (the current clock, not the highest a core reaches when cpufreq is not
// exposed, as in most VMs): a turbo clock above the base is up to ~1.5x
// on the servers of the last decade, and the bound must stay an upper one.
const turboAllowance = 1.5

// CPU is what the peak is made of, as read from the host.
type CPU struct {
	Model string
	// Arch is the vector unit the flags name ("AVX-512", "AVX2", "SSE2",
	// "NEON", "SVE"), Doubles its width in doubles, FMA whether it fuses.
	Arch    string
	Doubles int
	FMA     bool
	// ClockGHz is the highest clock found; ClockFrom where it came from.
	ClockGHz  float64
	ClockFrom string
}

// FlopsPerCycle is double-precision FLOP per cycle and CPU, an upper
// bound: two vector FMA units (two FLOP each per double) where the CPU
// fuses, else an add and a multiply unit.
func (c CPU) FlopsPerCycle() int {
	if c.FMA {
		return c.Doubles * 2 * 2
	}
	return c.Doubles * 2
}

var modelClock = regexp.MustCompile(`@\s*([0-9]+(?:\.[0-9]+)?)\s*GHz`)

// ParseCPUInfo reads /proc/cpuinfo's text (its first processor; the
// others are alike on the hosts hpcq runs on) and, when cpufreq says it,
// the highest clock in kHz (maxKHz 0: unknown).
func ParseCPUInfo(cpuinfo []byte, maxKHz int64) (CPU, error) {
	var c CPU
	var flags map[string]bool
	var mhz float64
	sc := bufio.NewScanner(bytes.NewReader(cpuinfo))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch key {
		case "model name", "cpu model":
			if c.Model == "" {
				c.Model = val
			}
		case "flags", "Features":
			if flags == nil {
				flags = map[string]bool{}
				for _, f := range strings.Fields(val) {
					flags[f] = true
				}
			}
		case "cpu MHz":
			if v, err := strconv.ParseFloat(val, 64); err == nil && v > mhz && v < 1e5 {
				mhz = v
			}
		}
	}
	if flags == nil {
		return c, fmt.Errorf("no flags or Features line in /proc/cpuinfo: the vector width is unknown")
	}
	c.Arch, c.Doubles, c.FMA = vectorUnit(flags)
	switch m := modelClock.FindStringSubmatch(c.Model); {
	case maxKHz > 0:
		c.ClockGHz, c.ClockFrom = float64(maxKHz)/1e6, "cpufreq's maximum"
	case mhz > 0:
		c.ClockGHz, c.ClockFrom = mhz/1000*turboAllowance, fmt.Sprintf("the current %.2f GHz x %.1f for turbo", mhz/1000, turboAllowance)
	case m != nil:
		v, _ := strconv.ParseFloat(m[1], 64)
		c.ClockGHz, c.ClockFrom = v*turboAllowance, fmt.Sprintf("the model's %s GHz x %.1f for turbo", m[1], turboAllowance)
	default:
		return c, fmt.Errorf("no clock: cpufreq, /proc/cpuinfo's cpu MHz and the model name say none")
	}
	return c, nil
}

// vectorUnit is the widest double-precision vector unit the flags name.
func vectorUnit(f map[string]bool) (arch string, doubles int, fma bool) {
	switch {
	case f["avx512f"]:
		return "AVX-512", 8, true
	case f["avx2"] || f["avx"]:
		return "AVX2", 4, f["fma"]
	case f["sse2"]:
		return "SSE2", 2, f["fma"]
	case f["sve"]:
		// SVE's width is the implementation's (128 to 2048 bits): 512 is
		// the widest shipped in HPC parts (A64FX).
		return "SVE", 8, true
	case f["asimd"]:
		return "NEON", 2, true
	}
	return "scalar", 1, false
}

// readMaxKHz is cpufreq's highest clock of CPU 0 (0: not exposed).
func readMaxKHz() int64 {
	data, err := os.ReadFile("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return v
}
