package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hpcq/hpcq/internal/hostbound"
	"github.com/hpcq/hpcq/internal/metrics"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/schema"
)

// Slot is the share of the machine one running task gets.
type Slot struct {
	// Index of the slot, 0 to Slots-1.
	Index int
	// Cores the task may use (OMP_NUM_THREADS): len(CPUs) when set.
	Cores int
	// CPUs the task's commands are bound to, its alone; empty: not bound.
	CPUs []int
	// GPUs are the device ids the task may use (CUDA_VISIBLE_DEVICES);
	// GPUShare how much of each it holds: 1, its alone; below 1, a share
	// (limits.gpus), other tasks holding the rest.
	GPUs     []string
	GPUShare float64
	// MPI, for a task of more than one node, is how its ranks are placed
	// and launched; nil otherwise.
	MPI *MPIShape
	// MemoryMB is the task's memory limit (limits.memory_mb); 0: none.
	MemoryMB int
}

// Executor runs one task. It returns the task's result, whatever the task
// did (a compile error is a result, not an error). It returns an error only
// when the task could not be run for reasons of the worker or the machine
// (the task is then handed back for another attempt), or ctx's error when ctx
// ended first (the worker is draining).
type Executor interface {
	Execute(ctx context.Context, task *schema.NodeTask, slot Slot) (*schema.NodeResult, error)
}

// ExecutorFunc adapts a function to Executor.
type ExecutorFunc func(ctx context.Context, task *schema.NodeTask, slot Slot) (*schema.NodeResult, error)

// Execute calls f.
func (f ExecutorFunc) Execute(ctx context.Context, task *schema.NodeTask, slot Slot) (*schema.NodeResult, error) {
	return f(ctx, task, slot)
}

// Config configures a worker. Every field has a default.
type Config struct {
	// ID names the worker in the registry. Defaults to <host>-<pid>-<random>.
	ID string
	// Pools the worker pulls from. Defaults to ["cpu"].
	Pools []string
	// Slots is how many tasks run at once. Defaults to the number of cores.
	Slots int
	// Cores of the machine the slots share. Defaults to len(CPUSet).
	Cores int
	// CPUSet are the CPUs tasks are bound to, each task to a disjoint part.
	// Defaults to the process's affinity (a Slurm job's cpuset), cut to
	// Cores.
	CPUSet []int
	// MemoryMB the tasks may use in all; a task asking for more is
	// declined. Defaults to the cgroup's limit, else the machine's memory.
	MemoryMB int
	// GPUs of the machine. Defaults to len(GPUIDs).
	GPUs int
	// GPUIDs are the device ids handed out to slots as CUDA_VISIBLE_DEVICES:
	// with at least as many GPUs as slots each slot gets its own share,
	// otherwise slots share them round-robin.
	GPUIDs []string
	// GPUDevices are advertised in the registry.
	GPUDevices []queue.GPUDevice
	// IdleExit ends the worker after this long with no task running and
	// none received (0: never), releasing its allocation (Slurm jobs).
	IdleExit time.Duration
	// RequeueDelay is how long a task the worker lacks a required
	// toolchain for waits before its next delivery, when another live
	// worker of the pool has it. Defaults to 5s.
	RequeueDelay time.Duration
	// FetchWait is how long one pull request waits for tasks. It also bounds
	// how long a drain waits for an open pull request. Defaults to 1s.
	FetchWait time.Duration
	// RetryDelay is how long a task the worker could not run waits before
	// its next delivery. Defaults to 2s.
	RetryDelay time.Duration
	// Version is advertised in the registry.
	Version string
	// NodeExclusive: the worker's allocation holds its node alone (an
	// exclusive Slurm job): an exclusive task then ran alone on the node.
	NodeExclusive bool
	// Bound is the host's bound (hostbound.Start): on every result, and in
	// the registry once its bandwidth is measured. Nil: none is said.
	Bound *hostbound.Probe
	// Toolchains found on the machine, advertised in the registry.
	Toolchains map[string]string
	// Hosts are the nodes of the worker's Slurm allocation when it has more
	// than one (SlurmHosts): tasks of that many nodes (limits.nodes) run
	// here, their ranks launched across them; the worker runs on the first.
	Hosts []string
	// MultiNodeRefusal, when set, is why the worker declines multi-node
	// tasks though its allocation has the nodes (a workspace no other node
	// sees; a task user who may not start the job's steps).
	MultiNodeRefusal string
	// SlurmJobID is the Slurm job the worker runs in (SLURM_JOB_ID),
	// recorded in the registry.
	SlurmJobID string
	// Deadline is when the worker's allocation ends (its Slurm walltime);
	// zero: none. A task whose declared time limits (download + compile +
	// run) do not fit in what is left is handed back for another worker,
	// without using up a delivery.
	Deadline time.Time
	// Results, when set, receives the phase_runs, metrics and nodes rows of
	// every task the worker ran (pkg/results), before its result is
	// published. A sink that fails is logged; the task's result stands.
	Results results.Sink
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Metrics, when set, records the tasks answered, phase durations and
	// busy slots (worker --metrics-addr).
	Metrics *metrics.Worker
}

// ErrInvalidConfig is wrapped by configuration errors.
var ErrInvalidConfig = errors.New("invalid worker config")

func (c Config) withDefaults() Config {
	if len(c.CPUSet) == 0 {
		c.CPUSet, _ = AffinityCPUs()
	}
	if c.Cores <= 0 {
		c.Cores = len(c.CPUSet)
	}
	if c.Cores <= 0 {
		c.Cores = runtime.NumCPU()
	}
	if len(c.CPUSet) > c.Cores {
		c.CPUSet = c.CPUSet[:c.Cores]
	}
	if c.MemoryMB <= 0 {
		c.MemoryMB = MemoryMB()
	}
	if c.Slots <= 0 {
		c.Slots = c.Cores
	}
	if len(c.Pools) == 0 {
		c.Pools = []string{"cpu"}
	}
	if c.FetchWait <= 0 {
		c.FetchWait = time.Second
	}
	if c.RetryDelay <= 0 {
		c.RetryDelay = 2 * time.Second
	}
	if c.RequeueDelay <= 0 {
		c.RequeueDelay = 5 * time.Second
	}
	if c.GPUs == 0 {
		c.GPUs = len(c.GPUIDs)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ID == "" {
		c.ID = DefaultID()
	}
	return c
}

func (c Config) validate() error {
	if c.Slots > 4096 {
		return fmt.Errorf("%w: Slots %d, at most 4096", ErrInvalidConfig, c.Slots)
	}
	seen := map[string]bool{}
	for _, p := range c.Pools {
		if err := schema.ValidatePool(p); err != nil {
			return fmt.Errorf("%w: Pools: %v", ErrInvalidConfig, err)
		}
		if seen[p] {
			return fmt.Errorf("%w: Pools: %q listed twice", ErrInvalidConfig, p)
		}
		seen[p] = true
	}
	return nil
}

var idSeq atomic.Uint64

// DefaultID is <host>-<pid>-<n>, with characters a registry key cannot hold
// replaced.
func DefaultID() string {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, host)
	if host == "" {
		host = "host"
	}
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(idSeq.Add(1), 10)
}

// Worker pulls tasks of its pools and runs them on its slots.
type Worker struct {
	q     *queue.Queue
	exec  Executor
	cfg   Config
	log   *slog.Logger
	slots chan int
	// exclusive is held for reading by every task that runs, and for
	// writing by an exclusive one (alone).
	exclusive sync.RWMutex
	// drainSelf starts the worker's drain (Run sets it): an allocation
	// that lost a node runs nothing more.
	drainSelf context.CancelFunc
	// answering bounds the tasks that finished running and wait for their
	// result to be stored: a worker whose results cannot be published stops
	// taking new tasks instead of piling them up.
	answering chan struct{}
	running   atomic.Int64
	reg       *queue.Registration
	// lastActive is when a task last started or ended (unix nanoseconds).
	lastActive atomic.Int64
	host       string

	// cancelMu guards the cancels seen (by Cancel key: run, run/node) and
	// the running tasks' cancel functions.
	cancelMu sync.Mutex
	canceled map[string]queue.Cancel
	stoppers map[*schema.NodeTask]context.CancelCauseFunc
	// res hands out CPUs and GPUs to running tasks.
	res *resources
}

// ErrCanceled is the cause of a task context ended by a cancel.
var ErrCanceled = errors.New("canceled")

// New returns a worker; Run starts it.
func New(q *queue.Queue, exec Executor, cfg Config) (*Worker, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if exec == nil {
		return nil, fmt.Errorf("%w: no executor", ErrInvalidConfig)
	}
	host, _ := os.Hostname()
	w := &Worker{q: q, exec: exec, cfg: cfg, log: cfg.Logger.With("worker", cfg.ID), slots: make(chan int, cfg.Slots), host: host,
		canceled: map[string]queue.Cancel{}, stoppers: map[*schema.NodeTask]context.CancelCauseFunc{},
		res:       newResources(cfg.CPUSet, cfg.Cores, cfg.GPUIDs, cfg.MemoryMB),
		answering: make(chan struct{}, cfg.Slots)}
	for i := range cfg.Slots {
		w.slots <- i
	}
	return w, nil
}

// walltimeMargin is kept free before the deadline: the worker must answer,
// hand back and exit before the allocation ends.
const walltimeMargin = 10 * time.Second

// DeclaredLimit is the sum of the time limits a task declares (download,
// compile, run); 0 when it declares none.
func DeclaredLimit(t *schema.NodeTask) time.Duration {
	l := t.Limits
	return time.Duration(l.DownloadTimeoutS+l.CompileTimeoutS+l.RunTimeoutS) * time.Second
}

// ID is the worker's registry id.
func (w *Worker) ID() string { return w.cfg.ID }

// Run registers the worker and runs tasks until ctx ends, or until it has
// been idle for Config.IdleExit. Then it drains: it stops pulling, stops
// its running tasks and hands them back at once for another worker,
// unregisters, and returns nil.
func (w *Worker) Run(ctx context.Context) error {
	reg, err := w.q.RegisterWorker(ctx, queue.WorkerInfo{
		ID: w.cfg.ID, Host: w.host, PID: os.Getpid(), Pools: w.cfg.Pools, Slots: w.cfg.Slots,
		Cores: w.cfg.Cores, GPUs: w.cfg.GPUs, MemoryMB: w.cfg.MemoryMB, GPUDevices: w.cfg.GPUDevices, Toolchains: w.cfg.Toolchains, Version: w.cfg.Version,
		SlurmJobID: w.cfg.SlurmJobID, Deadline: w.cfg.Deadline, Nodes: max(1, len(w.cfg.Hosts)), Hosts: w.cfg.Hosts,
		Bound: w.cfg.Bound.Current(),
	})
	if err != nil {
		return err
	}
	w.reg = reg
	w.awaitBound(ctx, reg)
	w.setGPUMetrics()
	consumers := make([]*queue.PoolConsumer, 0, len(w.cfg.Pools))
	for _, p := range w.cfg.Pools {
		c, err := w.q.PoolConsumer(ctx, p, w.cfg.ID)
		if err != nil {
			_ = reg.Close(context.Background())
			return err
		}
		consumers = append(consumers, c)
	}
	w.log.Info("worker started", "pools", w.cfg.Pools, "slots", w.cfg.Slots, "cores", w.cfg.Cores)
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	w.drainSelf = stop
	if cancels, err := w.q.WatchCancels(ctx); err != nil {
		w.log.Warn("cancels not watched: a canceled run's tasks run to their end on this worker", "err", err)
	} else {
		go w.watchCancels(cancels)
	}
	w.lastActive.Store(time.Now().UnixNano())
	if w.cfg.IdleExit > 0 {
		go w.idleWatch(ctx, stop)
	}

	// tasks ends when the drain starts: running commands are stopped.
	var tasks sync.WaitGroup
	var pullers sync.WaitGroup
	for _, c := range consumers {
		pullers.Add(1)
		go func() {
			defer pullers.Done()
			w.pull(ctx, c, &tasks)
		}()
	}
	<-ctx.Done()
	w.log.Info("worker draining", "running", w.running.Load())
	reg.Update(func(i *queue.WorkerInfo) { i.Draining = true })
	pullers.Wait()
	tasks.Wait()
	fctx, fcancel := context.WithTimeout(context.Background(), 5*time.Second)
	if err := w.q.Flush(fctx); err != nil {
		w.log.Warn("flush before exit failed", "err", err)
	}
	fcancel()
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := reg.Close(cctx); err != nil {
		w.log.Warn("unregister failed; the registry will report this worker lost", "err", err)
	}
	w.log.Info("worker stopped")
	return nil
}

// idleWatch ends the worker once it has been idle for IdleExit.
func (w *Worker) idleWatch(ctx context.Context, stop context.CancelFunc) {
	tick := time.NewTicker(min(w.cfg.IdleExit/4, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			idle := time.Since(time.Unix(0, w.lastActive.Load()))
			if w.running.Load() == 0 && idle >= w.cfg.IdleExit {
				w.log.Info("worker idle, exiting", "idle", idle.Round(time.Millisecond), "idle_exit", w.cfg.IdleExit)
				stop()
				return
			}
		}
	}
}

// pull fetches as many tasks as there are free slots, as long as ctx lives.
func (w *Worker) pull(ctx context.Context, c *queue.PoolConsumer, tasks *sync.WaitGroup) {
	backoff := 100 * time.Millisecond
	for {
		var got []int
		select {
		case <-ctx.Done():
			return
		case s := <-w.slots:
			got = append(got, s)
		}
	more:
		for len(got) < 256 {
			select {
			case s := <-w.slots:
				got = append(got, s)
			default:
				break more
			}
		}
		used := 0
		// The fetch runs to its end even when ctx ends meanwhile, so that no
		// delivery is left unanswered: late arrivals are handed back.
		_, err := c.Fetch(context.Background(), len(got), w.cfg.FetchWait, func(d *queue.Delivery) {
			if ctx.Err() != nil || used == len(got) {
				if err := d.HandBack(context.Background(), 0); err != nil {
					w.log.Warn("nak failed", "node_id", d.Task.NodeID, "err", err)
				}
				return
			}
			slot := got[used]
			used++
			tasks.Add(1)
			w.running.Add(1)
			go func() {
				defer tasks.Done()
				w.run(ctx, d, slot)
			}()
		})
		for _, s := range got[used:] {
			w.slots <- s
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			w.log.Warn("fetch failed", "pool", c.Pool(), "err", err, "retry_in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
	}
}

// run executes one delivery on slot and answers it: result then ack, or a
// hand-back, or a dead letter.
func (w *Worker) run(drain context.Context, d *queue.Delivery, slot int) {
	t := d.Task
	// The task's logger is built only when something is logged: With
	// formats its attributes at once, a cost on every task otherwise.
	log := func() *slog.Logger {
		return w.log.With("run_id", t.RunID, "node_id", t.NodeID, "attempt", t.Attempt, "delivery", d.NumDelivered)
	}
	defer w.hold(d, log)()
	started := time.Now()
	g, ok := w.admit(drain, d, slot, started, log)
	if !ok {
		return
	}
	w.setGPUMetrics()
	released := false
	release := func() {
		if !released {
			released = true
			w.res.give(g)
			w.setGPUMetrics()
		}
	}
	defer release()
	tctx, stop := context.WithCancelCause(drain)
	forget := w.track(t, stop)
	if _, ok := w.cancelOf(t); ok { // canceled since admit's check
		stop(ErrCanceled)
	}
	sl := Slot{Index: slot, Cores: max(1, len(g.cpus)), GPUs: g.gpus, GPUShare: g.share(), MemoryMB: t.Limits.MemoryMB,
		MPI: w.mpiShape(t)}
	if w.res.bind {
		sl.CPUs = g.cpus
	}
	res, err := w.alone(t, func() (*schema.NodeResult, error) { return w.execute(tctx, t, sl) })
	forget()
	stop(nil)
	// The machine is free: answering needs no cores, so the slot goes back
	// before the result is stored, within the bound on pending answers.
	w.answering <- struct{}{}
	release()
	w.slots <- slot
	defer func() { <-w.answering }()
	if err != nil {
		w.notRun(drain, tctx, d, started, err, log)
		return
	}
	w.answer(drain, d, res, log)
}

// alone runs f as t asks: a task that is not exclusive beside the
// worker's others, an exclusive one once they have ended and with none
// starting until it ends (a writer's lock: while it waits, no other task
// starts, so it is not starved). Its result says so.
func (w *Worker) alone(t *schema.NodeTask, f func() (*schema.NodeResult, error)) (*schema.NodeResult, error) {
	if !t.Exclusive {
		w.exclusive.RLock()
		defer w.exclusive.RUnlock()
		return f()
	}
	w.exclusive.Lock()
	defer w.exclusive.Unlock()
	res, err := f()
	if res != nil {
		res.Exclusive = schema.ExclusiveWorker
		if w.cfg.NodeExclusive {
			res.Exclusive = schema.ExclusiveNode
		}
	}
	return res, err
}

// awaitBound lets no task run while the host's bandwidth is probed (the
// first start on a host: a fraction of a second): the probe would be in
// its timings. The registry's entry gets the figure once it is measured.
func (w *Worker) awaitBound(ctx context.Context, reg *queue.Registration) {
	if w.cfg.Bound == nil {
		return
	}
	select {
	case <-w.cfg.Bound.Measured():
	case <-time.After(probeWait):
		w.log.Warn("the host's bandwidth probe is still running: taking tasks beside it", "waited", probeWait)
	case <-ctx.Done():
	}
	go func() {
		select {
		case <-w.cfg.Bound.Measured():
			reg.Update(func(i *queue.WorkerInfo) { i.Bound = w.cfg.Bound.Current() })
		case <-ctx.Done():
		}
	}()
}

// probeWait bounds how long a starting worker waits for its host's
// bandwidth probe before it takes tasks.
const probeWait = 30 * time.Second

// confirmAckAfter: a task held this long is acked with a confirmed ack. A
// lost ack (a NATS cluster electing the consumer's leader loses those in
// flight) runs the task again: for a task this long the rerun costs more
// than the round trip of a confirmed ack, which would cost a third of the
// throughput of short tasks.
const confirmAckAfter = time.Second

// execute calls the executor, turning a panic into an error.
func (w *Worker) execute(ctx context.Context, t *schema.NodeTask, s Slot) (res *schema.NodeResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, fmt.Errorf("executor panic: %v", p)
		}
	}()
	res, err = w.exec.Execute(ctx, t, s)
	if err == nil && res == nil {
		err = errors.New("executor returned no result")
	}
	return res, err
}
