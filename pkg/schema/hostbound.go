package schema

import "math"

// HostBound is what the host a worker runs on can do at most, measured
// once per host (internal/hostbound): a metric beyond it was not produced
// by the work the program claims.
type HostBound struct {
	Host string `json:"host"`
	// CPUs are the logical CPUs the worker may use (its affinity: a Slurm
	// job's allocation); SMT siblings count, so the peak is an upper bound.
	CPUs int `json:"cpus"`
	// ClockGHz is the highest clock a core reaches (cpufreq's maximum; else
	// the model's or the current clock with a turbo allowance, said in
	// PeakHow).
	ClockGHz float64 `json:"clock_ghz"`
	// FlopsPerCycle is double-precision FLOP per cycle and CPU: vector
	// doubles x 2 for a fused multiply-add x 2 FMA units.
	FlopsPerCycle int `json:"flops_per_cycle"`
	// PeakGFLOPS is CPUs x ClockGHz x FlopsPerCycle; PeakHow says what it
	// was made of ("2 CPUs x 2.45 GHz x 16 FLOP/cycle (AVX2, FMA)").
	PeakGFLOPS float64 `json:"peak_gflops"`
	PeakHow    string  `json:"peak_how"`
	// TriadGBs is the best memory bandwidth a STREAM-triad probe measured
	// on this host (GB/s, 24 bytes an element); 0 until measured.
	TriadGBs float64 `json:"triad_gbs,omitempty"`
	TriadHow string  `json:"triad_how,omitempty"`
	// GPUs are the GPUs the task was given, each with its model's
	// published peak (PeakTFLOPS 0: a model hpcq has no figure for).
	GPUs []GPUPeak `json:"gpus,omitempty"`
}

// GPUPeak is one GPU's most FLOP/s: the largest figure its data sheet
// gives at any precision (the lowest, with sparsity), so that nothing the
// device does exceeds it.
type GPUPeak struct {
	ID         string  `json:"id"`
	Name       string  `json:"name"`
	PeakTFLOPS float64 `json:"peak_tflops,omitempty"`
	How        string  `json:"how,omitempty"`
}

// Validate checks a reported bound: positive, finite figures.
func (b *HostBound) Validate() error {
	if b == nil {
		return nil
	}
	for name, v := range map[string]float64{"clock_ghz": b.ClockGHz, "peak_gflops": b.PeakGFLOPS} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
			return fieldErr("host_bound."+name, "%v, must be a positive finite number", v)
		}
	}
	if math.IsNaN(b.TriadGBs) || math.IsInf(b.TriadGBs, 0) || b.TriadGBs < 0 {
		return fieldErr("host_bound.triad_gbs", "%v, must be a finite number >= 0", b.TriadGBs)
	}
	if b.CPUs < 1 || b.FlopsPerCycle < 1 {
		return fieldErr("host_bound", "cpus and flops_per_cycle must be >= 1")
	}
	for _, g := range b.GPUs {
		if math.IsNaN(g.PeakTFLOPS) || math.IsInf(g.PeakTFLOPS, 0) || g.PeakTFLOPS < 0 {
			return fieldErr("host_bound.gpus", "%v, must be a finite number >= 0", g.PeakTFLOPS)
		}
	}
	return nil
}
