// Command engine is the scale benchmark behind `make bench-engine`: trees of
// -nodes nodes (1,000 and 10,000 by default) grown by the real engine
// (Phase 0 and node prompts built with the run's memory, the real queue on
// an embedded server, the SQLite memory and results stores, the prompt
// logs and the memory call log of a run's defaults) in this
// process, the scheduler's; the workers (64 slots in all, a no-op
// executor that reports a metric) and an OpenAI-speaking fake endpoint
// that answers at once run in a child process, so that this process's CPU
// is the scheduler's and its embedded server's. As in local mode, the
// scheduler reaches the server in-process and the workers over loopback
// TCP. It prints one line per
// size:
//
//	bench-engine nodes=<int> workers=<int> slots=<int> sched_cpu_ms_per_node_p50=<f> sched_cpu_ms_per_node_p99=<f> wall_s=<f> resume_s=<f> peak_rss_mb=<f> journal_bytes=<int>
//
// sched_cpu_ms_per_node is this process's CPU time (user + system) in a
// window, divided among the nodes that ended in it: a window is closed by
// the first look (every 50 ms) at which 16 or more nodes have ended since
// it opened. resume_s is a second Run on
// the finished run directory, from its start until it returns (journal
// replayed, every stage found done, report and tree written again).
// peak_rss_mb is this process's maximum resident set.
//
// -store redis+clickhouse runs it in cluster mode (`make
// bench-engine-cluster`): the memory in the Redis and ClickHouse that
// HPCQ_REDIS_URL and HPCQ_CLICKHOUSE_DSN name and the results in that
// ClickHouse, written by the workers and the scheduler as `scheduler run`
// has them; -nats URL puts the queue on a nats-server process, whose CPU
// is then not this process's. Such a line ends "store=redis+clickhouse"
// and "nats=server". Each run there has a run id of its own.
//
// The endpoint (in the child, its CPU not counted) streams each reply in
// chunks of -chunk bytes (4: about a token each, as OpenAI streams); -llm
// whole asks for whole replies. A line says "llm=whole" or "chunk=N" when
// they are not the defaults.
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
	if url := os.Getenv(childEnv); url != "" {
		if err := child(url); err != nil {
			fmt.Fprintln(os.Stderr, "bench-engine child:", err)
			os.Exit(1)
		}
		return
	}
	sizes := flag.String("nodes", "1000,10000", "tree sizes, comma separated")
	workers := flag.Int("workers", 4, "worker processes' workers (in one child process)")
	slots := flag.Int("slots", 64, "slots of all workers together")
	codeBytes := flag.Int("code-bytes", 0, "add to each node's code a C file of about this many bytes (0: a one-line script only)")
	store := flag.String("store", storeSQLite, storeSQLite+" (the run directory's files, as in local mode) or "+storeCluster+
		" (memory and results in the servers HPCQ_REDIS_URL and HPCQ_CLICKHOUSE_DSN name, as in cluster mode)")
	nats := flag.String("nats", "", "a nats-server's URL (default: a server embedded in this process, as in local mode)")
	keep := flag.String("keep", "", "write the run directories here and keep them")
	profile := flag.String("cpuprofile", "", "write a CPU profile of this process (the scheduler's) to this file")
	heap := flag.String("memprofile", "", "write the live heap of this process when 95% of the nodes have ended to this file (<file>.<nodes> per size)")
	tracePath := flag.String("trace", "", "write a Go execution trace of this process to this file (go tool trace)")
	llmMode := flag.String("llm", "stream", "stream: replies streamed (as hpcq asks by default); whole: whole replies (HPCQ_LLM_STREAM=false)")
	chunk := flag.Int("chunk", defaultChunk, "bytes of reply in each streamed chunk (about one token, as OpenAI streams)")
	flag.Parse()
	stop, err := benchutil.CPUProfile(*profile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-engine:", err)
		os.Exit(1)
	}
	defer stop()
	stopTrace, err := benchutil.Trace(*tracePath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-engine:", err)
		os.Exit(1)
	}
	defer stopTrace()
	var ns []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 4 {
			fmt.Fprintf(os.Stderr, "bench-engine: -nodes %q: sizes of 4 or more\n", *sizes)
			os.Exit(2)
		}
		ns = append(ns, n)
	}
	if *workers < 1 || *slots < *workers || *codeBytes < 0 || *codeBytes > 1<<20 || *llmMode != "stream" && *llmMode != "whole" || *chunk < 1 {
		fmt.Fprintln(os.Stderr, "bench-engine: -workers >= 1, -slots >= -workers, -code-bytes from 0 to 1 MiB, -llm stream or whole, -chunk >= 1")
		os.Exit(2)
	}
	base := *keep
	if base == "" {
		// One directory for every size, removed at the end: a size's run
		// directory removed before the next size starts made the next one's
		// files dearer on ext4, whose inode allocator skips one by one the
		// inodes freed in the last minutes (the engine benchmark's eighth
		// pass, in `git log -p BENCHMARKS.md`).
		tmp, err := os.MkdirTemp("", "bench-engine-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-engine:", err)
			os.Exit(1)
		}
		base = tmp
	}
	code := 0
	for _, n := range ns {
		line, err := measure(n, options{workers: *workers, slots: *slots, codeBytes: *codeBytes, whole: *llmMode == "whole", chunk: *chunk, base: base, heap: *heap, store: *store, natsURL: *nats})
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-engine:", err)
			code = 1
			break
		}
		fmt.Println(line)
	}
	if *keep == "" {
		os.RemoveAll(base)
	}
	if code != 0 {
		stop()
		os.Exit(code)
	}
}
