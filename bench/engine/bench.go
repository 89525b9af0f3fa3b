package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/hpcq/hpcq/internal/benchutil"
	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/engine"
	"github.com/hpcq/hpcq/internal/fakellm"
	"github.com/hpcq/hpcq/internal/linelog"
	"github.com/hpcq/hpcq/internal/metrics"
	"github.com/hpcq/hpcq/internal/run"
	"github.com/hpcq/hpcq/internal/session"
	"github.com/hpcq/hpcq/internal/stores"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/queue/embedded"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// childEnv carries the embedded server's URL to the child process.
const (
	childEnv        = "HPCQ_BENCH_ENGINE_NATS"
	childWorkersEnv = "HPCQ_BENCH_ENGINE_WORKERS"
	childSlotsEnv   = "HPCQ_BENCH_ENGINE_SLOTS"
	childCodeEnv    = "HPCQ_BENCH_ENGINE_CODE_BYTES"
	childStoreEnv   = "HPCQ_BENCH_ENGINE_STORE"
	childChunkEnv   = "HPCQ_BENCH_ENGINE_CHUNK"
)

// The stores a benchmark run can use: the run directory's SQLite files
// (local mode), or Redis and ClickHouse (cluster mode: the memory in both,
// results in ClickHouse, from the scheduler and from the workers).
const (
	storeSQLite  = "sqlite"
	storeCluster = "redis+clickhouse"
)

// spec is the run: n nodes over the four stages, a quarter each, slots
// nodes in flight, memory on (the SQLite store).
func spec(n, slots int) (run.Spec, error) {
	s := run.Defaults()
	s.Idea = "Print a score as high as possible."
	s.Metric = run.Metric{Name: "score", Direction: "maximize", Unit: "points"}
	q := n / 4
	s.Stages = run.Stages{InitialImplementation: run.Stage{MaxIterations: n - 3*q}, BaselineTuning: run.Stage{MaxIterations: q},
		CreativeResearch: run.Stage{MaxIterations: q}, AblationStudies: run.Stage{MaxIterations: q}}
	s.Search.NumDrafts = 8
	s.Search.Slots = slots
	s.LLM.Model = "bench-model"
	return s, s.Validate()
}

// replier answers every prompt at once: plans, code whose score differs
// per node (no two nodes share files: no result cache hit), summaries.
// With codeBytes > 0 each node's code also has a C file of about that size,
// as a model writes: the replies, task files, prompts that show a parent's
// code and the code snapshots in memory are then as large as in a run.
func replier(codeBytes int) func(fakellm.Request) fakellm.Reply {
	return func(r fakellm.Request) fakellm.Reply {
		switch r.Kind {
		case "phase0":
			return fakellm.Reply{Content: fakellm.WithMemory(`{"core": {"PHASE0_SUMMARY": "print the score"}}`, fakellm.Plan("a shell script")), TokensIn: 100, TokensOut: 50}
		case "draft", "debug", "improve", "hyperparam", "ablation":
			files := []fakellm.File{{Path: "run.sh", Content: fmt.Sprintf("echo 'METRIC score=%d'\n", r.N)}}
			if codeBytes > 0 {
				files = append(files, fakellm.File{Path: "stencil.c", Content: cCode(r.N, codeBytes)})
			}
			return fakellm.Reply{Content: fakellm.WithMemory(`{"archival": [{"text": "wrote run.sh for node `+fmt.Sprint(r.N)+`", "tags": ["`+r.Kind+`"]}]}`,
				fakellm.Artifacts(files, nil, []string{"bash run.sh"})), TokensIn: 200, TokensOut: 100}
		case "summary":
			// The node's summary, asked with memory: the block first, as a model
			// that follows the prompt answers (without it, each is asked 3 times).
			return fakellm.Reply{Content: fakellm.WithMemory(`{}`, `{"summary": "node `+fmt.Sprint(r.N)+` printed its score"}`), TokensIn: 150, TokensOut: 30}
		case "summarize":
			return fakellm.Reply{Content: `{"summary": "earlier events folded"}`}
		case "compress":
			return fakellm.Reply{Content: "compressed"}
		}
		return fakellm.Reply{Status: 400}
	}
}

// cCode is an OpenMP C file of about size bytes for node n: stencil
// kernels, each a little different, and a main.
func cCode(n, size int) string {
	var b strings.Builder
	b.WriteString("#include <omp.h>\n#include <stdio.h>\n#include <stdlib.h>\n\n")
	for k := 0; b.Len() < size-300; k++ {
		fmt.Fprintf(&b, `/* Jacobi sweep %d of node %d: blocked by %d, "halo" of one cell. */
static void sweep_%d(double *restrict out, const double *restrict in, int nx, int ny) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int j = 1; j < ny - 1; j++)
        for (int i = 1; i < nx - 1; i++)
            out[j * nx + i] = 0.25 * (in[j * nx + i - 1] + in[j * nx + i + 1] + in[(j - 1) * nx + i] + in[(j + 1) * nx + i]);
}

`, k, n, 16<<(k%4), k)
	}
	fmt.Fprintf(&b, "int main(void) {\n    double t = omp_get_wtime();\n    printf(\"METRIC score=%%d\\n\", %d);\n    printf(\"time %%f\\n\", omp_get_wtime() - t);\n    return 0;\n}\n", n)
	return b.String()
}

// defaultChunk is the bytes of reply in each streamed chunk: about one
// token, as OpenAI streams.
const defaultChunk = 4

// child runs the workers and the endpoint until its stdin closes; it
// prints the endpoint's URL first.
//
// Long: the child process's side of the benchmark, step by step.
func child(natsURL string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	var workers, slots, codeBytes, chunk int
	if _, err := fmt.Sscan(os.Getenv(childWorkersEnv)+" "+os.Getenv(childSlotsEnv)+" "+os.Getenv(childCodeEnv)+" "+os.Getenv(childChunkEnv),
		&workers, &slots, &codeBytes, &chunk); err != nil {
		return fmt.Errorf("workers, slots, code size and chunk: %w", err)
	}
	srv, err := fakellm.StartWith("127.0.0.1:0", false, fakellm.Options{Chunk: chunk}, replier(codeBytes))
	if err != nil {
		return err
	}
	defer srv.Close()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	nc, err := queue.Connect(ctx, queue.ConnConfig{URL: natsURL, Name: "bench-engine-workers"}, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	q, err := queue.New(ctx, nc, queue.Options{UseExisting: true}, log)
	if err != nil {
		return err
	}
	// In cluster mode each worker writes its rows to ClickHouse, as a
	// worker given HPCQ_CLICKHOUSE_DSN does.
	cluster := os.Getenv(childStoreEnv) == storeCluster
	var common config.Common
	if cluster {
		if err := config.Load(&common); err != nil {
			return err
		}
	}
	spool, err := os.MkdirTemp("", "bench-engine-spool-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(spool)
	var sinks []results.Sink
	defer func() {
		for _, s := range sinks {
			if err := s.Close(); err != nil {
				fmt.Fprintln(os.Stderr, "bench-engine child: results:", err)
			}
		}
	}()
	noop := worker.ExecutorFunc(func(_ context.Context, task *schema.NodeTask, _ worker.Slot) (*schema.NodeResult, error) {
		return &schema.NodeResult{Started: time.Now(), Phases: []schema.PhaseResult{{Name: "run", OK: true}},
			Metrics: map[string]float64{"score": float64(len(task.NodeID))}}, nil
	})
	errs := make(chan error, workers)
	for i := range workers {
		wc := worker.Config{ID: fmt.Sprintf("bench-%d", i), Pools: []string{"cpu"}, Slots: slots / workers, Cores: slots / workers, Logger: log}
		if cluster {
			sink, err := results.OpenClickHouse(ctx, results.ClickHouseOptions{DSN: common.Store.ClickHouseDSN,
				SpoolDir: spool, Name: stores.ResultsSpoolName(wc.ID), Logger: log})
			if err != nil {
				return err
			}
			sinks = append(sinks, sink)
			wc.Results = sink
		}
		w, err := worker.New(q, noop, wc)
		if err != nil {
			return err
		}
		go func() { errs <- w.Run(ctx) }()
	}
	fmt.Println("llm", srv.BaseURL())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	<-ctx.Done()
	var first error
	for range workers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// options are a benchmark's settings besides the tree's size.
type options struct {
	workers, slots, codeBytes int
	// whole asks for whole replies; else they are streamed in chunks of
	// chunk bytes.
	whole   bool
	chunk   int
	base    string // the run directories' parent
	heap    string // the heap profile's file ("" for none)
	store   string // storeSQLite or storeCluster (Redis and ClickHouse of config.Store from the environment)
	natsURL string // a nats-server's URL; "" for a server embedded in this process
}

// measure grows a tree of n nodes in o.base, then resumes the finished run.
//
// Long: the benchmark's scenario step by step, as BENCHMARKS.md describes
// it; its result lines are printed in one place.
func measure(n int, o options) (string, error) {
	ctx := context.Background()
	workers, slots := o.workers, o.slots
	name := fmt.Sprintf("run-bench-%d", n)
	var cfg config.Store
	if o.store == storeCluster {
		// The servers outlive the run: a run id of its own each time.
		name = fmt.Sprintf("run-bench-%d-%d", n, time.Now().UnixNano())
		var common config.Common
		if err := config.Load(&common); err != nil {
			return "", err
		}
		cfg = common.Store
		if cfg.RedisURL == "" || cfg.ClickHouseDSN == "" {
			return "", fmt.Errorf("-store %s: set HPCQ_REDIS_URL and HPCQ_CLICKHOUSE_DSN (scripts/services.sh up DIR redis clickhouse writes them)", storeCluster)
		}
	} else if o.store != storeSQLite {
		return "", fmt.Errorf("-store %q: %s or %s", o.store, storeSQLite, storeCluster)
	}
	dir := filepath.Join(o.base, name)
	if o.store == storeCluster {
		cfg.SpoolDir = filepath.Join(dir, "spool")
	}
	if err := os.MkdirAll(filepath.Join(dir, "memory"), 0o755); err != nil {
		return "", err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	// Local mode: the scheduler reaches its embedded server in-process
	// (internal/local), the workers (the child) over loopback TCP.
	natsURL := o.natsURL
	var nc *nats.Conn
	if natsURL == "" {
		srv, err := embedded.Start(embedded.Options{StoreDir: filepath.Join(dir, "nats"), Listen: true})
		if err != nil {
			return "", err
		}
		defer srv.Shutdown()
		natsURL = srv.ClientURL()
		if nc, err = srv.Connect("bench-engine"); err != nil {
			return "", err
		}
	} else {
		var err error
		if nc, err = queue.Connect(ctx, queue.ConnConfig{URL: natsURL, Name: "bench-engine"}, log); err != nil {
			return "", err
		}
	}
	defer nc.Close()
	q, err := queue.New(ctx, nc, queue.Options{}, log)
	if err != nil {
		return "", err
	}

	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), childEnv+"="+natsURL, fmt.Sprintf("%s=%d", childWorkersEnv, workers), fmt.Sprintf("%s=%d", childSlotsEnv, slots),
		fmt.Sprintf("%s=%d", childCodeEnv, o.codeBytes), childStoreEnv+"="+o.store, fmt.Sprintf("%s=%d", childChunkEnv, o.chunk))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	defer func() {
		stdin.Close()
		_ = cmd.Wait()
	}()
	first, err := bufio.NewReader(stdout).ReadString('\n')
	url, ok := strings.CutPrefix(strings.TrimSpace(first), "llm ")
	if err != nil || !ok {
		return "", fmt.Errorf("the child did not start (%q, %v)", first, err)
	}

	sp, err := spec(n, slots)
	if err != nil {
		return "", err
	}
	client, err := llm.NewOpenAI(llm.OpenAIOptions{BaseURL: url, APIKey: "bench", Model: "bench-model", Concurrency: slots, NoStream: o.whole, Logger: log})
	if err != nil {
		return "", err
	}
	mode := "local"
	if o.store == storeCluster {
		mode = "cluster"
	}
	open := func() (*session.Session, engine.Params, func(), error) {
		// The stores as the scheduler opens them: the run directory's SQLite
		// files, or Redis and ClickHouse when cfg names them.
		sink, _, err := stores.OpenResults(ctx, cfg, rundir.Dir(dir), log)
		if err != nil {
			return nil, engine.Params{}, nil, err
		}
		store, _, err := stores.OpenMemory(ctx, cfg, rundir.Dir(dir), "", 0, log)
		if err != nil {
			sink.Close()
			return nil, engine.Params{}, nil, err
		}
		// The memory call log, on as in a run's defaults (memory.log_enabled).
		calls, err := linelog.Open(filepath.Join(dir, rundir.MemoryCalls), memory.CallLogFlush)
		if err != nil {
			store.Close()
			sink.Close()
			return nil, engine.Params{}, nil, err
		}
		reg := prometheus.NewRegistry()
		// In cluster mode the workers write their results' rows, as
		// `scheduler run` has them do with ClickHouse (internal/schedcmd).
		s, err := session.Open(session.Params{Spec: sp, RunDir: dir, LLM: client, MemoryStore: store, MemoryCalls: calls, Results: sink,
			Logger: log, Metrics: metrics.NewScheduler(reg)})
		if err != nil {
			store.Close()
			sink.Close()
			calls.Close()
			return nil, engine.Params{}, nil, err
		}
		p := engine.Params{Queue: q, Results: sink, Mode: mode, Slots: slots, Progress: io.Discard, ProgressEvery: time.Hour, Gateway: nc,
			WorkersWriteResults: o.store == storeCluster}
		return s, p, func() { s.Close(); store.Close(); sink.Close(); calls.Close() }, nil
	}

	s, p, closeStores, err := open()
	if err != nil {
		return "", err
	}
	perNode := make(chan []float64, 1)
	done := make(chan struct{})
	atEnd := func() {}
	if o.heap != "" {
		atEnd = func() {
			if err := benchutil.HeapProfile(fmt.Sprintf("%s.%d", o.heap, n)); err != nil {
				fmt.Fprintln(os.Stderr, "bench-engine:", err)
			}
		}
	}
	go func() { perNode <- sample(s.Metrics.Nodes, done, 0.95*float64(n), atEnd) }()
	start, startCPU := time.Now(), benchutil.CPUTime()
	sum, err := engine.Run(ctx, s, p)
	wall, runCPU := time.Since(start), benchutil.CPUTime()-startCPU
	close(done)
	cpu := <-perNode
	closeStores()
	if err != nil {
		return "", fmt.Errorf("run of %d nodes: %w", n, err)
	}
	if sum.Nodes != n {
		return "", fmt.Errorf("run of %d nodes: %d nodes ran (%d buggy, stopped by %q)", n, sum.Nodes, sum.Buggy, sum.StoppedBy)
	}
	fmt.Fprintf(os.Stderr, "bench-engine: %d nodes (%d buggy, %d from the result cache) in %.1f s; this process's CPU %.1f s, %.3f ms per node on average\n",
		sum.Nodes, sum.Buggy, sum.CacheHits, wall.Seconds(), runCPU.Seconds(), runCPU.Seconds()*1000/float64(sum.Nodes))

	s, p, closeStores, err = open()
	if err != nil {
		return "", err
	}
	start = time.Now()
	if _, err := engine.Run(ctx, s, p); err != nil {
		closeStores()
		return "", fmt.Errorf("resume of %d nodes: %w", n, err)
	}
	resume := time.Since(start)
	closeStores()

	var journal int64
	_ = filepath.Walk(filepath.Join(dir, "journal"), func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			journal += fi.Size()
		}
		return nil
	})
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	slices.Sort(cpu)
	line := fmt.Sprintf("bench-engine nodes=%d workers=%d slots=%d sched_cpu_ms_per_node_p50=%.3f sched_cpu_ms_per_node_p99=%.3f wall_s=%.1f resume_s=%.2f peak_rss_mb=%.0f journal_bytes=%d",
		n, workers, slots, quantile(cpu, 0.50), quantile(cpu, 0.99), wall.Seconds(), resume.Seconds(), float64(ru.Maxrss)/1024, journal)
	// Settings other than the default's are said at the end of the line.
	if o.store != storeSQLite {
		line += " store=" + o.store
	}
	if o.natsURL != "" {
		line += " nats=server"
	}
	if o.whole {
		line += " llm=whole"
	} else if o.chunk != defaultChunk {
		line += fmt.Sprintf(" chunk=%d", o.chunk)
	}
	return line, nil
}

// windowNodes is how many nodes must have ended before a window of
// sample closes. Nodes end in bursts (a worker's results ending together
// travel as one message), so a window closed at any ended node gave the
// nodes of a burst a small share each and a lone node the whole window:
// the p50 read low and the p99 high, neither being a node's cost
// (BENCHMARKS.md, issue 18, tenth pass).
const windowNodes = 16

// sample looks at this process's CPU time and the nodes ended every 50 ms
// until done, and returns each ended node's share of the CPU time since the
// last look that closed a window: one at which windowNodes or more nodes
// had ended since the window opened. It calls at once when mark nodes
// have ended (its time is not counted), or at the end of a run that ended
// before a look saw them.
func sample(nodes *prometheus.CounterVec, done <-chan struct{}, mark float64, at func()) []float64 {
	var out []float64
	lastCPU, lastNodes := benchutil.CPUTime(), 0.0
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			if at != nil {
				at() // a run too short for the looks to see the mark
			}
			return out
		case <-tick.C:
		}
		ended := total(nodes)
		if ended < lastNodes+windowNodes {
			continue
		}
		now := benchutil.CPUTime()
		share := (now - lastCPU).Seconds() * 1000 / (ended - lastNodes)
		for range int(ended - lastNodes) {
			out = append(out, share)
		}
		lastCPU, lastNodes = now, ended
		if at != nil && ended >= mark {
			at()
			at, lastCPU = nil, benchutil.CPUTime()
		}
	}
}

func total(c *prometheus.CounterVec) float64 {
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	var sum float64
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err == nil && pb.Counter != nil {
			sum += pb.Counter.GetValue()
		}
	}
	return sum
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}
