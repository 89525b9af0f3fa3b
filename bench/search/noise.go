package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/hpcq/hpcq/internal/evaluate"
	"github.com/hpcq/hpcq/internal/tree"
	"github.com/hpcq/hpcq/pkg/schema"
)

// machineNoise times a memory-bound kernel (a 5-point stencil sweep over
// an n x n grid, one thread) runs times and returns each run's time over
// their median: this machine's timing noise, as its samples.
func machineNoise(runs, n int) []float64 {
	a, b := make([]float64, n*n), make([]float64, n*n)
	for i := range a {
		a[i] = float64(i%7) / 7
	}
	times := make([]float64, runs)
	for r := range times {
		start := time.Now()
		for i := 1; i < n-1; i++ {
			for j := 1; j < n-1; j++ {
				b[i*n+j] = 0.25 * (a[(i-1)*n+j] + a[(i+1)*n+j] + a[i*n+j-1] + a[i*n+j+1])
			}
		}
		a, b = b, a
		times[r] = time.Since(start).Seconds()
	}
	s := slices.Clone(times)
	slices.Sort(s)
	med := s[len(s)/2]
	for i := range times {
		times[i] /= med
	}
	return times
}

// noiseTrial draws nodes whose true rates are known, measures each with
// the machine's noise (a rate is work over a time: true / ratio), and
// says whether each rule picked a node that is not truly the best: one
// sample a node, the best by it; or repeats a node (their median and
// bootstrap interval, evaluate.Judge) and search.Better over them in
// creation order.
func noiseTrial(rng *rand.Rand, ratios []float64, nodes, repeats int, gap float64) (wrongSingle, wrongAware bool) {
	truth := make([]float64, nodes)
	for i, p := range rng.Perm(nodes) {
		truth[i] = 1 + gap*float64(p) // distinct rates, gap apart, in a random order of creation
	}
	best := 0
	for i := range truth {
		if truth[i] > truth[best] {
			best = i
		}
	}
	draw := func(i int) float64 { return truth[i] / ratios[rng.IntN(len(ratios))] }
	single, aware := 0, tree.Node{}
	var singleV float64
	for i := range truth {
		if v := draw(i); i == 0 || v > singleV {
			single, singleV = i, v
		}
		samples := make([]schema.EvalSample, repeats)
		for r := range samples {
			v := draw(i)
			samples[r] = schema.EvalSample{Input: "x", Repeat: r + 1, Correct: true, Metric: &v}
		}
		v := evaluate.Judge(samples, []string{"x"})
		n := tree.Node{ID: fmt.Sprint(i), Done: true, HasMetric: true, Metric: v.Metric}
		if v.Spread != nil {
			n.Q1, n.Q3, n.HasSpread = v.Spread.Q1, v.Spread.Q3, true
		}
		if i == 0 || tree.Better(n, aware, true) {
			aware = n
		}
	}
	return single != best, aware.ID != fmt.Sprint(best)
}

// runNoise prints the bench-search noise line: how often each rule picks
// a node that is not truly the best, over trials trees of nodes nodes.
func runNoise(nodes, trials, repeats int, gap float64, out, log io.Writer) {
	ratios := machineNoise(60, 1024)
	s := slices.Clone(ratios)
	slices.Sort(s)
	fmt.Fprintf(log, "  this machine's timing noise (60 sweeps of a 1024x1024 stencil, one thread): time/median from %.3f to %.3f, middle half %.3f to %.3f\n",
		s[0], s[len(s)-1], s[len(s)/4], s[3*len(s)/4])
	fmt.Fprintf(log, "  %d trials of %d nodes, true rates %.0f%% apart, %d repeats a node for the noise-aware rule\n", trials, nodes, 100*gap, repeats)
	rng := rand.New(rand.NewPCG(11, 12))
	var single, aware int
	for range trials {
		ws, wa := noiseTrial(rng, ratios, nodes, repeats, gap)
		if ws {
			single++
		}
		if wa {
			aware++
		}
	}
	pct := func(n int) float64 { return 100 * float64(n) / float64(trials) }
	fmt.Fprintf(out, "bench-search noise nodes=%d wrong_best_single=%.1f%% wrong_best_noise_aware=%.1f%%\n", nodes, pct(single), pct(aware))
}
