// Package metrics defines hpcq's Prometheus metrics, all named hpcq_* with
// their unit in the name and bounded labels (pools, phases, statuses,
// purposes, models: never a node or run id), and serves them.
//
// Each process registers the set it updates on its own registry: a worker
// (Worker), slurm-bridge (Bridge), the scheduler (Scheduler). A nil set
// records nothing, so the code that updates them needs no checks.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Worker is what a worker records.
type Worker struct {
	// Tasks counts tasks answered, by pool and status: ok, failed,
	// canceled, handed_back, dead_lettered.
	Tasks *prometheus.CounterVec
	// PhaseSeconds is the duration of each phase that ran.
	PhaseSeconds *prometheus.HistogramVec
	// Slots is the worker's slots by state: total, busy.
	Slots *prometheus.GaugeVec
	// GPUs is the worker's GPUs (MIG instances count one each); GPUsInUse
	// how many of them its running tasks hold, by the tasks' pool (shares
	// add up: two tasks of 0.5 hold 1).
	GPUs      prometheus.Gauge
	GPUsInUse *prometheus.GaugeVec
}

// NewWorker registers a worker's metrics on reg.
func NewWorker(reg prometheus.Registerer) *Worker {
	m := &Worker{
		Tasks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hpcq_worker_tasks_total",
			Help: "Tasks the worker answered, by pool and status (ok, failed, canceled, handed_back, dead_lettered)."}, []string{"pool", "status"}),
		PhaseSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hpcq_worker_phase_duration_seconds",
			Help:    "Duration of the phases the worker ran, by pool and phase.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600}}, []string{"pool", "phase"}),
		Slots: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hpcq_worker_slots",
			Help: "The worker's task slots, by state (total, busy)."}, []string{"state"}),
		GPUs: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hpcq_worker_gpus",
			Help: "The worker's GPUs (a MIG instance counts as one)."}),
		GPUsInUse: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hpcq_worker_gpus_in_use",
			Help: "GPUs the worker's running tasks hold, by the tasks' pool (fractional requests add up)."}, []string{"pool"}),
	}
	reg.MustRegister(m.Tasks, m.PhaseSeconds, m.Slots, m.GPUs, m.GPUsInUse)
	return m
}

// Task records a task answered with status, and the phases it ran.
func (m *Worker) Task(pool, status string, phases map[string]time.Duration) {
	if m == nil {
		return
	}
	m.Tasks.WithLabelValues(pool, status).Inc()
	for ph, d := range phases {
		m.PhaseSeconds.WithLabelValues(pool, ph).Observe(d.Seconds())
	}
}

// SetSlots records the worker's slots and how many are busy.
func (m *Worker) SetSlots(total, busy int) {
	if m == nil {
		return
	}
	m.Slots.WithLabelValues("total").Set(float64(total))
	m.Slots.WithLabelValues("busy").Set(float64(busy))
}

// SetGPUs records the worker's GPUs and what the tasks of each pool hold
// (pools: the worker's, each shown, at 0 when none of its tasks runs).
func (m *Worker) SetGPUs(total int, inUse map[string]float64, pools []string) {
	if m == nil {
		return
	}
	m.GPUs.Set(float64(total))
	for _, p := range pools {
		m.GPUsInUse.WithLabelValues(p).Set(inUse[p])
	}
	for p, v := range inUse {
		m.GPUsInUse.WithLabelValues(p).Set(v)
	}
}

// Bridge is what slurm-bridge records.
type Bridge struct {
	Jobs        *prometheus.GaugeVec
	Backlog     *prometheus.GaugeVec
	Workers     *prometheus.GaugeVec
	Submissions *prometheus.CounterVec
	Failures    *prometheus.CounterVec
	Paused      *prometheus.GaugeVec
}

// NewBridge registers slurm-bridge's metrics on reg.
func NewBridge(reg prometheus.Registerer) *Bridge {
	m := &Bridge{
		Jobs: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hpcq_bridge_jobs",
			Help: "The bridge's worker jobs in Slurm, by pool and state (pending, running)."}, []string{"pool", "state"}),
		Backlog: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hpcq_bridge_backlog_tasks",
			Help: "Tasks pending or in flight in a pool, as the bridge last saw them."}, []string{"pool"}),
		Workers: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hpcq_bridge_live_workers",
			Help: "Live workers of a pool, as the bridge last saw them."}, []string{"pool"}),
		Submissions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hpcq_bridge_submissions_total",
			Help: "Worker jobs the bridge submitted, by pool."}, []string{"pool"}),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hpcq_bridge_submit_failures_total",
			Help: "sbatch calls that failed, by pool."}, []string{"pool"}),
		Paused: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hpcq_bridge_paused",
			Help: "1 when the pool's queue is paused (its configuration must be fixed), else 0."}, []string{"pool"}),
	}
	reg.MustRegister(m.Jobs, m.Backlog, m.Workers, m.Submissions, m.Failures, m.Paused)
	return m
}

// Pool records what the bridge saw of a pool at its last look.
func (m *Bridge) Pool(pool string, backlog uint64, workers, pending, running int, paused bool) {
	if m == nil {
		return
	}
	m.Backlog.WithLabelValues(pool).Set(float64(backlog))
	m.Workers.WithLabelValues(pool).Set(float64(workers))
	m.Jobs.WithLabelValues(pool, "pending").Set(float64(pending))
	m.Jobs.WithLabelValues(pool, "running").Set(float64(running))
	p := 0.0
	if paused {
		p = 1
	}
	m.Paused.WithLabelValues(pool).Set(p)
}

// Submitted records n submissions of a pool, failed ones among them.
func (m *Bridge) Submitted(pool string, ok bool) {
	if m == nil {
		return
	}
	if ok {
		m.Submissions.WithLabelValues(pool).Inc()
	} else {
		m.Failures.WithLabelValues(pool).Inc()
	}
}

// Scheduler is what the scheduler of a run records.
type Scheduler struct {
	Nodes      *prometheus.CounterVec
	LLMCalls   *prometheus.CounterVec
	LLMTokens  *prometheus.CounterVec
	LLMCost    *prometheus.CounterVec
	LLMLatency *prometheus.HistogramVec
	// MemoryOps is the latency of memory operations, by operation and
	// outcome.
	MemoryOps *prometheus.HistogramVec
}

// NewScheduler registers the scheduler's metrics on reg.
func NewScheduler(reg prometheus.Registerer) *Scheduler {
	m := &Scheduler{
		Nodes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hpcq_scheduler_nodes_total",
			Help: "Nodes of the tree search that ended, by kind and status (the nodes table's words)."}, []string{"kind", "status"}),
		LLMCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hpcq_llm_calls_total",
			Help: "LLM requests, by purpose, model and outcome (ok, error)."}, []string{"purpose", "model", "outcome"}),
		LLMTokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hpcq_llm_tokens_total",
			Help: "LLM tokens, by purpose, model and direction (in, out; reasoning: the part of out spent reasoning)."}, []string{"purpose", "model", "direction"}),
		LLMCost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hpcq_llm_cost_usd_total",
			Help: "LLM cost in US dollars, by purpose and model."}, []string{"purpose", "model"}),
		LLMLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hpcq_llm_latency_seconds",
			Help:    "LLM request latency, by purpose and model.",
			Buckets: []float64{0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}}, []string{"purpose", "model"}),
	}
	m.MemoryOps = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hpcq_memory_op_duration_seconds",
		Help:    "Latency of memory operations (fork, core_set, recall_append, render, archival_search, ...), by operation and outcome.",
		Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5}}, []string{"op", "outcome"})
	reg.MustRegister(m.Nodes, m.LLMCalls, m.LLMTokens, m.LLMCost, m.LLMLatency, m.MemoryOps)
	return m
}

// MemoryOp records a memory operation.
func (m *Scheduler) MemoryOp(op string, d time.Duration, err error) {
	if m == nil {
		return
	}
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.MemoryOps.WithLabelValues(op, outcome).Observe(d.Seconds())
}

// Node records a node that ended.
func (m *Scheduler) Node(kind, status string) {
	if m == nil {
		return
	}
	m.Nodes.WithLabelValues(kind, status).Inc()
}

// Call records an LLM call: its tokens in and out, and of those out the
// reasoning tokens (direction="reasoning", counted in "out" too).
func (m *Scheduler) Call(purpose, model string, tokensIn, tokensOut, tokensReasoning int64, costUSD float64, latency time.Duration, failed bool) {
	if m == nil {
		return
	}
	outcome := "ok"
	if failed {
		outcome = "error"
	}
	m.LLMCalls.WithLabelValues(purpose, model, outcome).Inc()
	m.LLMTokens.WithLabelValues(purpose, model, "in").Add(float64(tokensIn))
	m.LLMTokens.WithLabelValues(purpose, model, "out").Add(float64(tokensOut))
	if tokensReasoning > 0 {
		m.LLMTokens.WithLabelValues(purpose, model, "reasoning").Add(float64(tokensReasoning))
	}
	m.LLMCost.WithLabelValues(purpose, model).Add(costUSD)
	m.LLMLatency.WithLabelValues(purpose, model).Observe(latency.Seconds())
}

// NewRegistry is a registry with the Go runtime's and the process's own
// metrics.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Serve serves reg at /metrics on addr until ctx ends. It returns once the
// listener is open (an error if it cannot be), with the address it got.
func Serve(ctx context.Context, addr string, reg *prometheus.Registry, log *slog.Logger) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", Handler(reg))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "err", err)
		}
	}()
	log.Info("metrics served", "url", "http://"+ln.Addr().String()+"/metrics")
	return ln.Addr().String(), nil
}

// Handler serves reg's metrics in the Prometheus exposition format.
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

// PoolCounts is what the queue says of a pool.
type PoolCounts struct {
	Pool                            string
	Pending, InFlight, DeadLettered uint64
	Workers, LostWorkers            int
}

// queueCollector reads the queue's pools at scrape time (a scrape while
// the server is away reports nothing of them).
type queueCollector struct {
	stats                          func(ctx context.Context) ([]PoolCounts, error)
	pending, deadLettered, workers *prometheus.Desc
}

// NewQueueCollector registers the queue's per pool gauges on reg:
// hpcq_queue_tasks{pool,state=pending|in_flight}, hpcq_queue_dead_letters
// {pool}, hpcq_queue_workers{pool,state=live|lost}.
func NewQueueCollector(reg prometheus.Registerer, stats func(ctx context.Context) ([]PoolCounts, error)) {
	reg.MustRegister(&queueCollector{stats: stats,
		pending:      prometheus.NewDesc("hpcq_queue_tasks", "Tasks of a pool, by state (pending, in_flight).", []string{"pool", "state"}, nil),
		deadLettered: prometheus.NewDesc("hpcq_queue_dead_letters", "Dead-lettered tasks of a pool kept.", []string{"pool"}, nil),
		workers:      prometheus.NewDesc("hpcq_queue_workers", "Workers of a pool in the registry, by state (live, lost).", []string{"pool", "state"}, nil),
	})
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pending
	ch <- c.deadLettered
	ch <- c.workers
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pools, err := c.stats(ctx)
	if err != nil {
		return
	}
	for _, p := range pools {
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(p.Pending), p.Pool, "pending")
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(p.InFlight), p.Pool, "in_flight")
		ch <- prometheus.MustNewConstMetric(c.deadLettered, prometheus.GaugeValue, float64(p.DeadLettered), p.Pool)
		ch <- prometheus.MustNewConstMetric(c.workers, prometheus.GaugeValue, float64(p.Workers), p.Pool, "live")
		ch <- prometheus.MustNewConstMetric(c.workers, prometheus.GaugeValue, float64(p.LostWorkers), p.Pool, "lost")
	}
}

// runsCollector reads the counts of the runs a dashboard serves at each
// scrape.
type runsCollector struct {
	counts      func() (runs, nodes map[string]int, err error)
	runs, nodes *prometheus.Desc
}

// NewRunsCollector registers hpcq_serve_runs{status} and
// hpcq_serve_nodes{status} on reg: the runs `scheduler serve` shows and
// their nodes, by status, read from counts at each scrape.
func NewRunsCollector(reg prometheus.Registerer, counts func() (runs, nodes map[string]int, err error)) {
	reg.MustRegister(&runsCollector{counts: counts,
		runs:  prometheus.NewDesc("hpcq_serve_runs", "Runs the dashboard serves, by status.", []string{"status"}, nil),
		nodes: prometheus.NewDesc("hpcq_serve_nodes", "Nodes of the runs the dashboard serves, by status.", []string{"status"}, nil),
	})
}

func (c *runsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.runs
	ch <- c.nodes
}

func (c *runsCollector) Collect(ch chan<- prometheus.Metric) {
	runs, nodes, err := c.counts()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.runs, err)
		return
	}
	for status, n := range runs {
		ch <- prometheus.MustNewConstMetric(c.runs, prometheus.GaugeValue, float64(n), status)
	}
	for status, n := range nodes {
		ch <- prometheus.MustNewConstMetric(c.nodes, prometheus.GaugeValue, float64(n), status)
	}
}
