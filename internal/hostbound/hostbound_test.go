package hostbound

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

const epycVM = `processor	: 0
vendor_id	: AuthenticAMD
model name	: AMD EPYC
cpu MHz		: 2596.144
flags		: fpu sse sse2 fma avx avx2 avx512f avx512dq
`

const xeon = `processor	: 0
model name	: Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz
flags		: fpu sse2 avx avx2 fma avx512f
`

const haswellNoClock = `model name	: Intel(R) Core(TM) i7-4770
flags		: sse2 avx avx2 fma
`

const graviton = `processor	: 0
BogoMIPS	: 243.75
Features	: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp ssbs
`

func TestParseCPUInfo(t *testing.T) {
	c, err := ParseCPUInfo([]byte(epycVM), 0)
	require.NoError(t, err)
	require.Equal(t, "AVX-512", c.Arch)
	require.Equal(t, 32, c.FlopsPerCycle())
	require.InDelta(t, 2.596144*turboAllowance, c.ClockGHz, 1e-9, "a VM's current clock, allowed its turbo")
	require.Contains(t, c.ClockFrom, "turbo")

	c, err = ParseCPUInfo([]byte(xeon), 3_700_000)
	require.NoError(t, err)
	require.Equal(t, 3.7, c.ClockGHz, "cpufreq's maximum, the turbo clock itself")
	require.Equal(t, "cpufreq's maximum", c.ClockFrom)

	c, err = ParseCPUInfo([]byte(haswellNoClock), 0)
	require.Error(t, err, "no clock anywhere: no bound rather than a made-up one")

	c, err = ParseCPUInfo([]byte(xeon), 0)
	require.NoError(t, err)
	require.InDelta(t, 2.4*turboAllowance, c.ClockGHz, 1e-9, "the model's clock")

	c, err = ParseCPUInfo([]byte(graviton), 2_600_000)
	require.NoError(t, err)
	require.Equal(t, "NEON", c.Arch)
	require.Equal(t, 8, c.FlopsPerCycle())

	_, err = ParseCPUInfo([]byte("processor : 0\n"), 1)
	require.ErrorContains(t, err, "vector width")
}

func TestPeak(t *testing.T) {
	c, err := ParseCPUInfo([]byte(xeon), 3_700_000)
	require.NoError(t, err)
	b := Peak("h1", 40, c)
	require.InDelta(t, 40*3.7*32, b.PeakGFLOPS, 1e-9)
	require.Equal(t, "40 CPUs x 3.70 GHz (cpufreq's maximum) x 32 FLOP/cycle (AVX-512, FMA)", b.PeakHow)
	require.NoError(t, b.Validate())
}

func TestParseRate(t *testing.T) {
	for unit, want := range map[string]Rate{
		"GFLOP/s": {true, 1e9}, "Gflop/s": {true, 1e9}, "GFLOPS": {true, 1e9}, "gflops": {true, 1e9},
		"MFLOP/s": {true, 1e6}, "TFLOP/s": {true, 1e12}, "FLOP/s": {true, 1}, "kFLOP/s": {true, 1e3},
		"GB/s": {false, 1e9}, "GiB/s": {false, 1 << 30}, "MB/s": {false, 1e6}, "MiB/s": {false, 1 << 20},
		"B/s": {false, 1}, "GBps": {false, 1e9}, "Gb/s": {false, 1e9 / 8}, " GB / s ": {false, 1e9},
	} {
		r, ok := ParseRate(unit)
		require.True(t, ok, unit)
		require.Equal(t, want, r, unit)
	}
	for _, unit := range []string{"", "s", "ms", "seconds", "x", "%", "GLUPS", "MLUP/s", "mB/s", "GXB/s", "Gi/s", "/s", "iB/s"} {
		_, ok := ParseRate(unit)
		require.False(t, ok, unit)
	}
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"GFLOP/s", "GiB/s", "GBps", "Gb/s", "flops", "x/sec"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, unit string) {
		r, ok := ParseRate(unit)
		if ok && !(r.Scale > 0) {
			t.Fatalf("%q: scale %v", unit, r.Scale)
		}
	})
}

func FuzzParseCPUInfo(f *testing.F) {
	for _, s := range []string{epycVM, xeon, graviton, haswellNoClock} {
		f.Add(s, int64(0))
	}
	f.Fuzz(func(t *testing.T, info string, khz int64) {
		c, err := ParseCPUInfo([]byte(info), khz)
		if err == nil && (!(c.ClockGHz > 0) || c.FlopsPerCycle() < 1) {
			t.Fatalf("no error and no bound: %+v", c)
		}
	})
}

func TestLimitOf(t *testing.T) {
	b := &schema.HostBound{Host: "h", CPUs: 2, ClockGHz: 2.5, FlopsPerCycle: 16, PeakGFLOPS: 80, PeakHow: "2 CPUs x 2.5 GHz x 16",
		TriadGBs: 10, TriadHow: "triad"}
	l, ok := LimitOf(b, Metric{Unit: "GFLOP/s"})
	require.True(t, ok, "a FLOP/s unit is bounded by the peak unless the run says none")
	require.Equal(t, 80.0, l.Value)
	require.Contains(t, l.How, "peak: 2 CPUs")
	l, ok = LimitOf(b, Metric{Unit: "MFLOP/s", Bound: BoundFlops})
	require.True(t, ok)
	require.InDelta(t, 80_000, l.Value, 1e-6)
	_, ok = LimitOf(b, Metric{Unit: "GFLOP/s", Bound: BoundNone})
	require.False(t, ok)
	_, ok = LimitOf(b, Metric{Unit: "s"})
	require.False(t, ok, "a time has no bound of the host's")
	_, ok = LimitOf(b, Metric{Unit: "GB/s"})
	require.False(t, ok, "bandwidth only when the run says so: caches make it the kernel's")
	l, ok = LimitOf(b, Metric{Unit: "GB/s", Bound: BoundBandwidth})
	require.True(t, ok)
	require.Equal(t, 20.0, l.Value)
	l, ok = LimitOf(b, Metric{Unit: "GFLOP/s", Bound: BoundRoofline, Intensity: 0.25})
	require.True(t, ok)
	require.Equal(t, 5.0, l.Value, "a stencil's 0.25 FLOP/byte: 0.25 x 2 x 10 GB/s")
	require.Contains(t, l.How, "roofline")
	l, ok = LimitOf(b, Metric{Unit: "GFLOP/s", Bound: BoundRoofline, Intensity: 100})
	require.True(t, ok)
	require.Equal(t, 80.0, l.Value, "compute-bound: the peak")
	noTriad := *b
	noTriad.TriadGBs = 0
	_, ok = LimitOf(&noTriad, Metric{Unit: "GB/s", Bound: BoundBandwidth})
	require.False(t, ok, "not measured yet: no judgement")
	_, ok = LimitOf(nil, Metric{Unit: "GFLOP/s"})
	require.False(t, ok)
}

func TestMetricCheck(t *testing.T) {
	require.NoError(t, Metric{Unit: "s"}.Check())
	require.NoError(t, Metric{Unit: "GFLOP/s", Bound: BoundFlops}.Check())
	require.ErrorContains(t, Metric{Unit: "s", Bound: BoundFlops}.Check(), "needs a unit of FLOP/s")
	require.ErrorContains(t, Metric{Unit: "GFLOP/s", Bound: BoundBandwidth}.Check(), "bytes a second")
	require.ErrorContains(t, Metric{Unit: "GFLOP/s", Bound: BoundRoofline}.Check(), "metric.intensity")
	require.ErrorContains(t, Metric{Unit: "GFLOP/s", Bound: "peak"}.Check(), "one of flops")
}

func TestTriadMeasures(t *testing.T) {
	gbs, how := Triad(2, 1<<20, 2)
	require.Greater(t, gbs, 0.0)
	require.Contains(t, how, "STREAM triad, 2 threads")
}

// TestProbeCachesThePerHostBandwidth: the bandwidth is measured once and
// reused, and a later, lower measurement (a busy host) does not lower it.
func TestProbeCachesThePerHostBandwidth(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if _, err := os.ReadFile("/proc/cpuinfo"); err != nil {
		t.Skip("no /proc/cpuinfo on this machine")
	}
	cache := filepath.Join(t.TempDir(), "hb.json")
	p := start("h1", 2, cache, log)
	if p.Current() == nil {
		t.Skip("this host's /proc/cpuinfo gives no bound (see the warning)")
	}
	select {
	case <-p.Measured():
	case <-time.After(2 * time.Minute):
		t.Fatal("the triad was not measured within 2 minutes")
	}
	b := p.Current()
	require.Greater(t, b.TriadGBs, 0.0)
	require.NoError(t, b.Validate())
	data, err := os.ReadFile(cache)
	require.NoError(t, err)
	require.Contains(t, string(data), `"host": "h1"`)

	again := start("h1", 2, cache, log)
	<-again.Measured()
	require.Equal(t, b.TriadGBs, again.Current().TriadGBs, "from the cache")

	low := *b
	low.TriadGBs = b.TriadGBs / 10
	model := strings.TrimSpace(strings.Split(strings.Split(string(data), `"model": "`)[1], `"`)[0])
	require.NoError(t, writeCache(cache, low, model))
	e, ok := readCache(cache, "h1", 2, model)
	require.True(t, ok)
	require.Equal(t, b.TriadGBs, e.TriadGBs, "the best seen stays")

	other := start("h2", 2, cache, log)
	<-other.Measured()
	require.Equal(t, "h2", other.Current().Host, "another host's cache is not this one's")
}

// TestJudge: the program that lies about its speed, the harness that
// times wrong, and the honest node with its share of the peak.
func TestJudge(t *testing.T) {
	b := &schema.HostBound{Host: "cn01", CPUs: 2, ClockGHz: 2.5, FlopsPerCycle: 16, PeakGFLOPS: 80, PeakHow: "2 CPUs x 2.50 GHz x 16 FLOP/cycle"}
	res := &schema.NodeResult{HostBound: b}
	m := Metric{Unit: "GFLOP/s"}
	v := 5000.0
	liar := rundir.Outcome{Node: "n0005", Result: res, Metric: &v}
	Judge(&liar, res, "gflops", m)
	require.True(t, liar.Buggy)
	require.Nil(t, liar.Metric, "never ranked")
	require.True(t, liar.Bound.Impossible)
	require.Equal(t, 5000.0, *liar.Bound.Claimed)
	require.Equal(t, "impossible: gflops = 5000 GFLOP/s (the program's own report) is 62.5x what host cn01 can do at most, 80 GFLOP/s (peak: 2 CPUs x 2.50 GHz x 16 FLOP/cycle)", liar.Reason)
	liar.Seal()
	require.Equal(t, schema.NodeFailed, liar.Status)
	require.Equal(t, schema.ErrKindImpossible, liar.ErrorKind)

	h := 81.0
	harness := rundir.Outcome{Node: "n0006", Result: res, Metric: &h, MetricFrom: rundir.MetricFromEvaluator, Spread: &schema.Spread{Q1: 80, Q3: 82, Low: 80, High: 82, N: 5}}
	Judge(&harness, res, "gflops", m)
	require.True(t, harness.Buggy)
	require.Nil(t, harness.Spread)
	require.Contains(t, harness.Reason, "as the harness measured it")

	honest := 20.0
	ok := rundir.Outcome{Node: "n0007", Result: res, Metric: &honest}
	Judge(&ok, res, "gflops", m)
	require.False(t, ok.Buggy)
	require.Equal(t, 0.25, ok.Bound.Share)
	require.False(t, ok.Bound.Impossible)

	seconds := 1e9
	time := rundir.Outcome{Node: "n0008", Result: res, Metric: &seconds}
	Judge(&time, res, "time", Metric{Unit: "s"})
	require.False(t, time.Buggy)
	require.Nil(t, time.Bound, "no bound of the host's on a time")

	mpi := &schema.NodeResult{HostBound: b, Limits: &schema.Enforced{Nodes: 4}}
	hundred := 100.0
	spread := rundir.Outcome{Node: "n0010", Result: mpi, Metric: &hundred}
	Judge(&spread, mpi, "gflops", m)
	require.False(t, spread.Buggy, "4 hosts' ranks: 4 x the peak")
	require.Equal(t, 320.0, spread.Bound.Limit)
	require.Contains(t, spread.Bound.How, "x 4 hosts")

	gpu := &schema.NodeResult{HostBound: b, Limits: &schema.Enforced{GPUs: []string{"0"}}}
	onGPU := rundir.Outcome{Node: "n0011", Result: gpu, Metric: &v}
	Judge(&onGPU, gpu, "gflops", m)
	require.False(t, onGPU.Buggy, "a GPU of no known model: not judged")
	require.Nil(t, onGPU.Bound)

	// An H100: its data sheet's largest figure besides the CPUs' peak.
	h100 := *b
	h100.GPUs = GPUsOf([]string{"GPU-mig-1"}, []Device{{Index: "0", UUID: "GPU-aaa", Name: "NVIDIA H100 80GB HBM3", MIG: []string{"GPU-mig-1"}}})
	onH100 := &schema.NodeResult{HostBound: &h100, Limits: &schema.Enforced{GPUs: []string{"GPU-mig-1"}}}
	fast := 900_000.0 // 900 TFLOP/s: an FP8 kernel could
	real := rundir.Outcome{Node: "n0012", Result: onH100, Metric: &fast}
	Judge(&real, onH100, "gflops", m)
	require.False(t, real.Buggy, real.Reason)
	require.Equal(t, 80+3958_000.0, real.Bound.Limit)
	require.Contains(t, real.Bound.How, "GPU GPU-mig-1 3958 TFLOP/s (H100 SXM: FP8 Tensor, sparse)")
	absurd := 5e6 // 5,000 TFLOP/s: no precision of an H100 reaches it
	liarGPU := rundir.Outcome{Node: "n0013", Result: onH100, Metric: &absurd}
	Judge(&liarGPU, onH100, "gflops", m)
	require.True(t, liarGPU.Buggy)
	require.Contains(t, liarGPU.Reason, "impossible: gflops = 5e+06 GFLOP/s")
	bw := rundir.Outcome{Node: "n0014", Result: onH100, Metric: &absurd}
	Judge(&bw, onH100, "bw", Metric{Unit: "GB/s", Bound: BoundBandwidth})
	require.False(t, bw.Buggy, "a GPU's memory bandwidth is not the host's")

	noHost := rundir.Outcome{Node: "n0009", Result: &schema.NodeResult{}, Metric: &v}
	Judge(&noHost, noHost.Result, "gflops", m)
	require.False(t, noHost.Buggy, "a worker that said no bound: nothing to judge by")
}

func TestGPUPeakOf(t *testing.T) {
	for name, want := range map[string]float64{"NVIDIA H100 80GB HBM3": 3958, "NVIDIA H100 PCIe": 3026, "NVIDIA H200": 3958,
		"NVIDIA GH200 480GB": 3958, "NVIDIA A100-SXM4-80GB": 624, "NVIDIA A100 80GB PCIe": 624, "NVIDIA L40S": 1466} {
		got, how, ok := GPUPeakOf(name)
		require.True(t, ok, name)
		require.Equal(t, want, got, name)
		require.NotEmpty(t, how)
	}
	for _, name := range []string{"NVIDIA H100 NVL", "Tesla V100-SXM2-16GB", "NVIDIA GeForce RTX 4090", ""} {
		_, _, ok := GPUPeakOf(name)
		require.False(t, ok, "%q: no figure, no bound", name)
	}
	gs := GPUsOf([]string{"1", "GPU-x"}, []Device{{Index: "0", Name: "NVIDIA A100-SXM4-80GB"}, {Index: "1", Name: "NVIDIA L40S"}})
	require.Equal(t, 1466.0, gs[0].PeakTFLOPS)
	require.Zero(t, gs[1].PeakTFLOPS, "an id no device has")
}
