package hostbound

import (
	"slices"
	"strings"

	"github.com/hpcq/hpcq/pkg/schema"
)

// gpuPeaks are data-sheet figures: the largest FLOP/s each model's sheet
// gives at any precision (the lowest, with 2:4 sparsity), in TFLOP/s.
// First match wins: a more specific name before a shorter one. A model not
// here has no bound (nothing is judged on it), which is safer than a guess.
var gpuPeaks = []struct {
	match  []string // all in the nvidia-smi name, upper case
	tflops float64
	how    string
}{
	{[]string{"H100", "PCIE"}, 3026, "H100 PCIe: FP8 Tensor, sparse"},
	{[]string{"H100", "NVL"}, 0, ""},
	{[]string{"H100"}, 3958, "H100 SXM: FP8 Tensor, sparse"},
	{[]string{"GH200"}, 3958, "GH200 (H100/H200 SXM): FP8 Tensor, sparse"},
	{[]string{"H200"}, 3958, "H200 (H100 SXM's compute): FP8 Tensor, sparse"},
	{[]string{"A100"}, 624, "A100: FP16/BF16 Tensor, sparse"},
	{[]string{"L40S"}, 1466, "L40S: FP8 Tensor, sparse"},
}

// GPUPeakOf is a GPU model's published peak, from its nvidia-smi name
// ("NVIDIA H100 80GB HBM3"); ok false for a model hpcq has no figure for.
func GPUPeakOf(name string) (tflops float64, how string, ok bool) {
	up := strings.ToUpper(name)
	for _, p := range gpuPeaks {
		all := true
		for _, m := range p.match {
			all = all && strings.Contains(up, m)
		}
		if all {
			return p.tflops, p.how, p.tflops > 0
		}
	}
	return 0, "", false
}

// Device is what a GPU id names: the card (an index or UUID; a MIG
// instance's UUID names its card).
type Device struct {
	Index, UUID, Name string
	MIG               []string // its MIG instances' UUIDs
}

// GPUsOf are the peaks of the GPUs a task was given (ids as
// CUDA_VISIBLE_DEVICES names them) among the worker's devices; a GPU whose
// card or model is unknown has PeakTFLOPS 0.
func GPUsOf(ids []string, devices []Device) []schema.GPUPeak {
	var out []schema.GPUPeak
	for _, id := range ids {
		g := schema.GPUPeak{ID: id}
		for _, d := range devices {
			if id == d.Index || id == d.UUID || slices.Contains(d.MIG, id) {
				g.Name = d.Name
				g.PeakTFLOPS, g.How, _ = GPUPeakOf(d.Name)
				break
			}
		}
		out = append(out, g)
	}
	return out
}
