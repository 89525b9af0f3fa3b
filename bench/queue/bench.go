package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hpcq/hpcq/internal/benchutil"
	"github.com/hpcq/hpcq/internal/executor"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/queue/embedded"
	"github.com/hpcq/hpcq/pkg/schema"
)

type params struct {
	N, SpawnN, SpawnHomeN, Rate, ContainerN int
	LatencyFor                              time.Duration
	// Isolation is the executor's sandbox mode for spawn ("": auto).
	Isolation string
	Only      string
	// Slots are the worker's slot counts drain runs with (none: 2 and 64).
	Slots []int
	// Reps of each throughput measurement; the median is printed.
	Reps int
}

// median of xs (xs is sorted in place).
func median(xs []float64) float64 {
	sort.Float64s(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

func samples(xs []float64) string {
	out := ""
	for i, x := range xs {
		if i > 0 {
			out += " "
		}
		out += strconv.FormatFloat(x, 'f', 1, 64)
	}
	return out
}

// env is one fresh embedded server with file storage in a temp dir.
type env struct {
	dir string
	srv *embedded.Server
	nc  *nats.Conn
	q   *queue.Queue
}

func newEnv(opts queue.Options) (*env, error) {
	dir, err := os.MkdirTemp("", "hpcq-bench-")
	if err != nil {
		return nil, err
	}
	srv, err := embedded.Start(embedded.Options{StoreDir: filepath.Join(dir, "nats")})
	if err != nil {
		return nil, err
	}
	nc, err := srv.Connect("bench")
	if err != nil {
		return nil, err
	}
	q, err := queue.New(context.Background(), nc, opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return nil, err
	}
	return &env{dir: dir, srv: srv, nc: nc, q: q}, nil
}

func (e *env) close() {
	e.nc.Close()
	e.srv.Shutdown()
	os.RemoveAll(e.dir)
}

func makeTasks(run string, n int, cmd string, c *schema.Container) []*schema.NodeTask {
	out := make([]*schema.NodeTask, n)
	for i := range out {
		out[i] = &schema.NodeTask{V: 1, RunID: run, NodeID: "n" + strconv.Itoa(i), Attempt: 1, Pool: "cpu",
			Artifacts: schema.Artifacts{Run: schema.RunPhase{Commands: []string{cmd}}}, Container: c}
	}
	return out
}

func noop(context.Context, *schema.NodeTask, worker.Slot) (*schema.NodeResult, error) {
	return &schema.NodeResult{Started: time.Now(), Phases: []schema.PhaseResult{{Name: schema.PhaseRun, OK: true}}}, nil
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startWorker runs a worker until the returned stop is called.
func startWorker(q *queue.Queue, exec worker.Executor, slots int) (stop func() error, err error) {
	w, err := worker.New(q, exec, worker.Config{Slots: slots, Cores: slots, Logger: quiet()})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	return func() error { cancel(); return <-done }, nil
}

// awaitResults reads n distinct results of run.
func awaitResults(q *queue.Queue, run string, n int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	w, err := q.WatchRun(ctx, run, time.Now())
	if err != nil {
		return err
	}
	defer w.Close()
	for got := 0; got < n; {
		select {
		case r := <-w.Results:
			if r.Error != nil {
				return fmt.Errorf("task %s failed: %s", r.NodeID, r.Error.Message)
			}
			got++
		case d := <-w.DeadLetters:
			return fmt.Errorf("task %s dead-lettered: %s", d.NodeID, d.Reason)
		case <-ctx.Done():
			return fmt.Errorf("%d of %d results after %v", got, n, timeout)
		}
	}
	return nil
}

func run(p params, out, log io.Writer) error {
	parts := []struct {
		name string
		fn   func(params, io.Writer, io.Writer) error
	}{{"enqueue", benchEnqueue}, {"drain", benchDrain}, {"latency", benchLatency}, {"spawn", benchSpawn}, {"container", benchContainer}}
	ran := false
	for _, part := range parts {
		if p.Only != "" && p.Only != part.name {
			continue
		}
		ran = true
		if err := part.fn(p, out, log); err != nil {
			return fmt.Errorf("%s: %w", part.name, err)
		}
	}
	if !ran {
		return fmt.Errorf("unknown part %q", p.Only)
	}
	return nil
}

func benchEnqueue(p params, out, log io.Writer) error {
	var rates, raws []float64
	for r := range p.Reps {
		raw, rate, err := enqueueOnce(p.N, r)
		if err != nil {
			return err
		}
		raws, rates = append(raws, raw), append(rates, rate)
	}
	fmt.Fprintf(log, "  enqueue: samples %s tasks/s; baseline raw async publish of the same payloads: %s msgs/s\n", samples(rates), samples(raws))
	fmt.Fprintf(out, "bench-queue enqueue n=%d tasks_per_s=%.1f\n", p.N, median(rates))
	return nil
}

// enqueueOnce publishes n encoded tasks raw (the baseline: pipelined
// publishes with no validation or encoding by hpcq), then n tasks through
// PublishTasks, on a fresh server.
func enqueueOnce(n, rep int) (raw, rate float64, err error) {
	e, err := newEnv(queue.Options{})
	if err != nil {
		return 0, 0, err
	}
	defer e.close()
	tasks := makeTasks("base", n, "true", nil)
	payloads := make([][]byte, len(tasks))
	for i, t := range tasks {
		payloads[i], _ = json.Marshal(t)
	}
	js := e.q.JetStream()
	t0 := time.Now()
	for i, data := range payloads {
		if _, err := js.PublishAsync(queue.TaskSubject(tasks[0].Pool, tasks[0].RunID), data, jetstream.WithMsgID("b"+strconv.Itoa(i))); err != nil {
			return 0, 0, err
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		return 0, 0, errors.New("baseline publishes not acknowledged within a minute")
	}
	raw = float64(n) / time.Since(t0).Seconds()

	tasks = makeTasks("enq"+strconv.Itoa(rep), n, "true", nil)
	t0 = time.Now()
	if _, err := e.q.PublishTasks(context.Background(), tasks); err != nil {
		return 0, 0, err
	}
	return raw, float64(n) / time.Since(t0).Seconds(), nil
}

func benchDrain(p params, out, log io.Writer) error {
	slots := p.Slots
	if len(slots) == 0 {
		slots = []int{2, 64}
	}
	for _, c := range slots {
		var rates, cpus, cores []float64
		for range p.Reps {
			rate, cpu, err := drainOnce(p.N, c)
			if err != nil {
				return err
			}
			rates = append(rates, rate)
			cpus = append(cpus, cpu.Seconds()*1e6/float64(p.N))
			cores = append(cores, cpu.Seconds()*rate/float64(p.N))
		}
		fmt.Fprintf(log, "  drain c=%d: samples %s tasks/s; CPU per task %s us (server, worker and watch), cores busy %s\n",
			c, samples(rates), samples(cpus), samples(cores))
		fmt.Fprintf(out, "bench-queue drain n=%d c=%d tasks_per_s=%.1f\n", p.N, c, median(rates))
	}
	return nil
}

// drainOnce enqueues n tasks on a fresh server, then times one worker with
// c slots and a no-op handler until the scheduler side has every result. It
// returns the rate and the process's CPU time over the drain.
func drainOnce(n, c int) (float64, time.Duration, error) {
	e, err := newEnv(queue.Options{})
	if err != nil {
		return 0, 0, err
	}
	defer e.close()
	run := "drain" + strconv.Itoa(c)
	if _, err := e.q.PublishTasks(context.Background(), makeTasks(run, n, "true", nil)); err != nil {
		return 0, 0, err
	}
	done := make(chan error, 1)
	go func() { done <- awaitResults(e.q, run, n, 10*time.Minute) }()
	t0, cpu0 := time.Now(), benchutil.CPUTime()
	stop, err := startWorker(e.q, worker.ExecutorFunc(noop), c)
	if err != nil {
		return 0, 0, err
	}
	err = <-done
	el, cpu := time.Since(t0), benchutil.CPUTime()-cpu0
	_ = stop()
	if err != nil {
		return 0, 0, err
	}
	return float64(n) / el.Seconds(), cpu, nil
}

func benchLatency(p params, out, log io.Writer) error {
	e, err := newEnv(queue.Options{})
	if err != nil {
		return err
	}
	defer e.close()
	n := int(float64(p.Rate) * p.LatencyFor.Seconds())
	enq := make([]atomic.Int64, n)
	got := make([]atomic.Int64, n)
	exec := worker.ExecutorFunc(func(ctx context.Context, t *schema.NodeTask, s worker.Slot) (*schema.NodeResult, error) {
		now := time.Now().UnixNano()
		if i, err := strconv.Atoi(t.NodeID[1:]); err == nil && i < n {
			got[i].Store(now)
		}
		return noop(ctx, t, s)
	})
	stop, err := startWorker(e.q, exec, 2)
	if err != nil {
		return err
	}
	defer func() { _ = stop() }()
	tasks := makeTasks("lat", n, "true", nil)
	done := make(chan error, 1)
	go func() { done <- awaitResults(e.q, "lat", n, p.LatencyFor+time.Minute) }()
	time.Sleep(200 * time.Millisecond) // the worker's first pull request is open
	tick := time.NewTicker(time.Second / time.Duration(p.Rate))
	defer tick.Stop()
	for i, t := range tasks {
		<-tick.C
		enq[i].Store(time.Now().UnixNano())
		if _, err := e.q.PublishTask(context.Background(), t); err != nil {
			return err
		}
	}
	if err := <-done; err != nil {
		return err
	}
	lat := make([]float64, n)
	for i := range lat {
		lat[i] = float64(got[i].Load()-enq[i].Load()) / 1e6
	}
	sort.Float64s(lat)
	q := func(f float64) float64 { return lat[min(n-1, int(f*float64(n)))] }
	fmt.Fprintf(out, "bench-queue latency rate=%d p50_ms=%.3f p95_ms=%.3f p99_ms=%.3f max_ms=%.3f\n", p.Rate, q(0.50), q(0.95), q(0.99), lat[n-1])
	return nil
}

func benchSpawn(p params, out, log io.Writer) error {
	// First in the environment users have: the machine's own HOME, whose
	// login profile a login shell per command pays every time (the plain
	// loop) and a worker pays once at start (its captured environment).
	if err := spawnRounds(p, p.SpawnHomeN, "spawn", "", out, log); err != nil {
		return err
	}
	// Then with an empty HOME, so that a slow profile does not hide what
	// hpcq itself costs per task (queue, workspace, logs, sandbox).
	home, err := os.MkdirTemp("", "hpcq-bench-home-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	return spawnRounds(p, p.SpawnN, "spawn_empty_home", home, out, log)
}

// spawnRounds times n tasks of /bin/true through hpcq against a login
// shell per command, with HOME set to home ("": the machine's own).
func spawnRounds(p params, n int, name, home string, out, log io.Writer) error {
	if home != "" {
		realHome := os.Getenv("HOME")
		os.Setenv("HOME", home)
		defer os.Setenv("HOME", realHome)
	}
	const cmd = "/bin/true"
	argv := executor.ShellArgv(cmd, true)

	// Rounds alternate hpcq and the plain loop, so that drift in the
	// machine's speed hits both alike; the medians are printed.
	var hs, ps []float64
	for r := range p.Reps {
		h, err := spawnHpcq(spawnRun{n: n, cmd: cmd, rep: r, isolation: p.Isolation}, log)
		if err != nil {
			return err
		}
		pl, err := spawnPlain(n, argv)
		if err != nil {
			return err
		}
		hs, ps = append(hs, h), append(ps, pl)
		fmt.Fprintf(log, "  %s round %d: hpcq %.3f s, plain %.3f s, ratio %.3f\n", name, r+1, h, pl, h/pl)
	}
	h, pl := median(hs), median(ps)
	fmt.Fprintf(out, "bench-queue %s n=%d hpcq_s=%.3f plain_s=%.3f ratio=%.3f\n", name, n, h, pl, h/pl)
	nologin, err := spawnPlain(min(n, 200), executor.ShellArgv(cmd, false))
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "  %s: %.3f ms per task through hpcq, %.3f ms per plain spawn of %q (HOME %s); bash -c without a login: %.3f ms\n",
		name, h*1000/float64(n), pl*1000/float64(n), argv, cmp.Or(home, os.Getenv("HOME")), nologin*1000/float64(min(n, 200)))
	return nil
}

// spawnRun is one timed round of spawn: n tasks running cmd (in the
// image container, with the images' cache imageCache).
type spawnRun struct {
	n          int
	cmd        string
	rep        int
	isolation  string
	container  *schema.Container
	imageCache string
	imageDirs  []string // the site's image directories
}

// spawnHpcq enqueues the round's tasks on a fresh server, then times one
// worker with one slot and the real executor until every result is in.
func spawnHpcq(s spawnRun, log io.Writer) (float64, error) {
	n, cmd, rep := s.n, s.cmd, s.rep
	e, err := newEnv(queue.Options{})
	if err != nil {
		return 0, err
	}
	defer e.close()
	ex, err := executor.NewExecutor(executor.Config{RunsDir: filepath.Join(e.dir, "runs"), Sandbox: executor.SandboxConfig{Mode: s.isolation},
		Images: executor.ImagesConfig{Dir: s.imageCache, Dirs: s.imageDirs}})
	if err != nil {
		return 0, err
	}
	if rep == 0 {
		fmt.Fprintf(log, "  sandbox: %s\n", ex.Isolation())
	}
	run := "spawn" + strconv.Itoa(rep)
	if _, err := e.q.PublishTasks(context.Background(), makeTasks(run, n, cmd, s.container)); err != nil {
		return 0, err
	}
	done := make(chan error, 1)
	go func() { done <- awaitResults(e.q, run, n, 30*time.Minute) }()
	t0 := time.Now()
	stop, err := startWorker(e.q, ex, 1)
	if err != nil {
		return 0, err
	}
	err = <-done
	el := time.Since(t0)
	_ = stop()
	return el.Seconds(), err
}

// spawnPlain runs argv n times, one at a time.
func spawnPlain(n int, argv []string) (float64, error) {
	t0 := time.Now()
	for range n {
		if err := exec.Command(argv[0], argv[1:]...).Run(); err != nil {
			return 0, fmt.Errorf("plain loop: %w", err)
		}
	}
	return time.Since(t0).Seconds(), nil
}
