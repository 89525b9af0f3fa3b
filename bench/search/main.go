// Command search is the tree-search benchmark behind `make bench-search`:
// 200 nodes with simulated durations (log-normal, fixed seed; no LLM, no
// compile) on 4 slots, asynchronous expansion against lockstep batches,
// the same durations for both (node i takes duration i). It prints:
//
//	bench-search nodes=200 slots=4 async_utilization=<f> lockstep_utilization=<f> async_wall_s=<f> lockstep_wall_s=<f>
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	"github.com/hpcq/hpcq/internal/search"
	"github.com/hpcq/hpcq/internal/tree"
)

// simulated runs node i for durations[i] and reports a seeded outcome.
type simulated struct {
	durations []time.Duration
	buggy     []bool
	metric    []float64
}

func (s simulated) Run(ctx context.Context, n *tree.Node) (search.Result, error) {
	i, err := strconv.Atoi(n.ID[1:])
	if err != nil || i < 1 || i > len(s.durations) {
		return search.Result{}, fmt.Errorf("node %s out of range", n.ID)
	}
	i--
	select {
	case <-time.After(s.durations[i]):
	case <-ctx.Done():
		return search.Result{}, ctx.Err()
	}
	if s.buggy[i] {
		return search.Result{Buggy: true, Reason: "simulated failure"}, nil
	}
	return search.Result{Metric: s.metric[i], HasMetric: true}, nil
}

func newSimulated(nodes int, median time.Duration, sigma float64, seed uint64) simulated {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	s := simulated{}
	for range nodes {
		d := time.Duration(float64(median) * math.Exp(sigma*rng.NormFloat64()))
		s.durations = append(s.durations, d)
		s.buggy = append(s.buggy, rng.Float64() < 0.3)
		s.metric = append(s.metric, 10*rng.Float64())
	}
	return s
}

func main() {
	nodes := flag.Int("nodes", 200, "nodes to run")
	slots := flag.Int("slots", 4, "worker slots")
	median := flag.Duration("median", 20*time.Millisecond, "median node duration")
	sigma := flag.Float64("sigma", 1.0, "log-normal sigma of node durations")
	noiseNodes := flag.Int("noise-nodes", 8, "nodes of each tree of the noise trials")
	trials := flag.Int("noise-trials", 1000, "trees of the noise trials")
	repeats := flag.Int("noise-repeats", 5, "measured repeats of a node under the noise-aware rule")
	gap := flag.Float64("noise-gap", 0.05, "share between the nodes' true rates")
	flag.Parse()
	if err := run(*nodes, *slots, *median, *sigma, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench-search:", err)
		os.Exit(1)
	}
	runNoise(*noiseNodes, *trials, *repeats, *gap, os.Stdout, os.Stderr)
}

func run(nodes, slots int, median time.Duration, sigma float64, out, log io.Writer) error {
	sim := newSimulated(nodes, median, sigma, 42)
	policy := func() search.Policy {
		return search.Policy{NumDrafts: 5, DebugProb: 0.5, MaxDebugDepth: 3, Maximize: true, Rand: rand.New(rand.NewPCG(7, 8))}
	}
	ctx := context.Background()
	async := search.Run(ctx, search.NewTree(), policy(), sim, slots, nodes, search.Async)
	lock := search.Run(ctx, search.NewTree(), policy(), sim, slots, nodes, search.Lockstep)
	if async.Nodes != nodes || lock.Nodes != nodes {
		return fmt.Errorf("ran %d and %d nodes of %d", async.Nodes, lock.Nodes, nodes)
	}
	var sum time.Duration
	for _, d := range sim.durations {
		sum += d
	}
	fmt.Fprintf(log, "  node durations: sum %v, ideal wall on %d slots %v\n", sum.Round(time.Millisecond), slots, (sum / time.Duration(slots)).Round(time.Millisecond))
	fmt.Fprintf(out, "bench-search nodes=%d slots=%d async_utilization=%.3f lockstep_utilization=%.3f async_wall_s=%.3f lockstep_wall_s=%.3f\n",
		nodes, slots, async.Utilization, lock.Utilization, async.Wall.Seconds(), lock.Wall.Seconds())
	return nil
}
