// Command queue is the queue benchmark behind `make bench-queue`: an
// embedded server with file storage, a no-op handler (no process) for
// enqueue, drain and latency, and the real executor for spawn. It prints
// exactly these lines on stdout (details and baselines go to stderr):
//
//	bench-queue enqueue n=100000 tasks_per_s=<float>
//	bench-queue drain n=100000 c=2 tasks_per_s=<float>
//	bench-queue drain n=100000 c=64 tasks_per_s=<float>
//	bench-queue latency rate=500 p50_ms=<f> p95_ms=<f> p99_ms=<f> max_ms=<f>
//	bench-queue spawn n=200 hpcq_s=<f> plain_s=<f> ratio=<f>
//	bench-queue spawn_empty_home n=2000 hpcq_s=<f> plain_s=<f> ratio=<f>
//	bench-queue container image=<dir|sqfs|sif|oci> n=300 hpcq_s=<f> plain_s=<f> ratio=<f>
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/hpcq/hpcq/internal/benchutil"
)

func main() {
	var p params
	flag.IntVar(&p.N, "n", 100_000, "tasks for enqueue and drain")
	flag.IntVar(&p.SpawnHomeN, "spawn-home-n", 200, "tasks for spawn with the machine's HOME (its login profile makes the baseline slow)")
	flag.IntVar(&p.SpawnN, "spawn-n", 2000, "tasks for spawn with an empty HOME")
	flag.IntVar(&p.ContainerN, "container-n", 300, "tasks for container, in each image and on the host")
	flag.IntVar(&p.Rate, "rate", 500, "tasks per second for latency")
	flag.DurationVar(&p.LatencyFor, "latency-for", 10_000_000_000, "duration of the latency run")
	flag.IntVar(&p.Reps, "reps", 3, "repetitions of each throughput measurement (the median is printed)")
	flag.StringVar(&p.Isolation, "isolation", "", "sandbox of the spawn tasks: auto (default), required or off")
	flag.StringVar(&p.Only, "only", "", "run one part: enqueue, drain, latency, spawn or container")
	slots := flag.String("c", "2,64", "the worker's slot counts for drain, comma-separated")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the benchmark (server, worker and scheduler side) to this file")
	tracePath := flag.String("trace", "", "write a Go execution trace of the benchmark to this file (go tool trace)")
	flag.Parse()
	if p.Reps < 1 || p.N < 1 || p.SpawnN < 1 || p.SpawnHomeN < 1 || p.Rate < 1 || p.ContainerN < 1 {
		fmt.Fprintln(os.Stderr, "bench-queue: -reps, -n, -spawn-n, -spawn-home-n, -container-n and -rate must be >= 1")
		os.Exit(2)
	}
	for _, f := range strings.Split(*slots, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 1 {
			fmt.Fprintf(os.Stderr, "bench-queue: -c %q: slot counts must be integers >= 1\n", *slots)
			os.Exit(2)
		}
		p.Slots = append(p.Slots, c)
	}
	stop, err := benchutil.CPUProfile(*profile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-queue:", err)
		os.Exit(1)
	}
	stopTrace, err := benchutil.Trace(*tracePath)
	if err != nil {
		stop()
		fmt.Fprintln(os.Stderr, "bench-queue:", err)
		os.Exit(1)
	}
	err = run(p, os.Stdout, os.Stderr)
	stopTrace()
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-queue:", err)
		os.Exit(1)
	}
}
