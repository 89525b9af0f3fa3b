package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/dispatch"
	"github.com/hpcq/hpcq/internal/runview"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/schema"
)

func forEachServer(t *testing.T, fn func(t *testing.T, srv *testutil.NATS)) {
	for _, kind := range testutil.ServerKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			fn(t, testutil.StartNATS(t, kind))
		})
	}
}

func tasks(n int) []*schema.NodeTask {
	out := make([]*schema.NodeTask, n)
	for i := range out {
		out[i] = &schema.NodeTask{V: 1, NodeID: fmt.Sprintf("n%03d", i), Attempt: 1, Pool: "cpu",
			Artifacts: schema.Artifacts{Run: schema.RunPhase{Commands: []string{"true"}}}}
	}
	return out
}

// okResult is what a no-op executor reports.
func okResult() *schema.NodeResult {
	return &schema.NodeResult{Started: time.Now(), Phases: []schema.PhaseResult{{Name: "run", OK: true}}}
}

type bundle struct {
	q      *queue.Queue
	w      *worker.Worker
	cancel context.CancelFunc
	done   chan error
}

// startWorker runs a worker until the test ends (or stop is called).
func startWorker(t *testing.T, q *queue.Queue, exec worker.Executor, cfg worker.Config) *bundle {
	t.Helper()
	cfg.Logger = testutil.Logger(t)
	w, err := worker.New(q, exec, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	b := &bundle{q: q, w: w, cancel: cancel, done: make(chan error, 1)}
	go func() { b.done <- w.Run(ctx) }()
	t.Cleanup(func() { b.stop(t) })
	return b
}

func (b *bundle) stop(t *testing.T) {
	b.cancel()
	select {
	case err, ok := <-b.done:
		if ok {
			require.NoError(t, err)
			close(b.done)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not stop within 30s")
	}
}

func execAll(t *testing.T, q *queue.Queue, ts []*schema.NodeTask) []dispatch.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	outs, err := dispatch.Exec(ctx, q, dispatch.ExecParams{Tasks: ts, Logger: testutil.Logger(t)})
	require.NoError(t, err)
	return outs
}

func TestWorkerRunsEveryTaskOnce(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv *testutil.NATS) {
		q := srv.Queue(t, queue.Options{})
		var mu sync.Mutex
		runs := map[string]int{}
		var concurrent, peak atomic.Int64
		exec := worker.ExecutorFunc(func(ctx context.Context, task *schema.NodeTask, s worker.Slot) (*schema.NodeResult, error) {
			n := concurrent.Add(1)
			defer concurrent.Add(-1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			mu.Lock()
			runs[task.NodeID]++
			mu.Unlock()
			time.Sleep(5 * time.Millisecond) //nolint:forbidigo // a task takes a moment
			return okResult(), nil
		})
		startWorker(t, q, exec, worker.Config{Slots: 3, Cores: 6})
		startWorker(t, q, exec, worker.Config{Slots: 2, Cores: 2})
		outs := execAll(t, q, tasks(60))
		for _, o := range outs {
			require.True(t, o.OK(), o.Task.NodeID)
			require.Equal(t, 1, runs[o.Task.NodeID], o.Task.NodeID)
		}
		require.LessOrEqual(t, peak.Load(), int64(5), "never more tasks at once than slots")
		// Acks follow the results closely, but not in lockstep.
		testutil.Eventually(t, 10*time.Second, "an empty work queue", func() bool {
			stats, err := q.Stats(context.Background())
			require.NoError(t, err)
			require.Len(t, stats, 1)
			return stats[0].Pending+stats[0].InFlight == 0
		})
	})
}

func TestWorkerHeartbeatsLongTasks(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv *testutil.NATS) {
		q := srv.Queue(t, queue.Options{AckWait: time.Second})
		var calls atomic.Int64
		exec := worker.ExecutorFunc(func(ctx context.Context, task *schema.NodeTask, s worker.Slot) (*schema.NodeResult, error) {
			calls.Add(1)
			time.Sleep(3 * time.Second) //nolint:forbidigo // 3 x AckWait
			return okResult(), nil
		})
		startWorker(t, q, exec, worker.Config{Slots: 1})
		startWorker(t, q, exec, worker.Config{Slots: 1}) // would get a redelivery
		outs := execAll(t, q, tasks(1))
		require.True(t, outs[0].OK())
		require.EqualValues(t, 1, calls.Load(), "InProgress heartbeats kept the task from redelivery")
	})
}

func TestWorkerDrainHandsTasksBack(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv *testutil.NATS) {
		q := srv.Queue(t, queue.Options{AckWait: time.Minute})
		started := make(chan string, 4)
		blocking := worker.ExecutorFunc(func(ctx context.Context, task *schema.NodeTask, s worker.Slot) (*schema.NodeResult, error) {
			started <- "a"
			<-ctx.Done() // runs until the drain stops it
			return nil, ctx.Err()
		})
		a := startWorker(t, q, blocking, worker.Config{ID: "a", Slots: 1})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := q.PublishTask(ctx, &schema.NodeTask{V: 1, RunID: "r", NodeID: "long", Attempt: 1, Pool: "cpu",
			Artifacts: schema.Artifacts{Run: schema.RunPhase{Commands: []string{"sleep 1000"}}}})
		require.NoError(t, err)
		select {
		case <-started:
		case <-ctx.Done():
			t.Fatal("worker a never started the task")
		}
		picked := make(chan time.Time, 1)
		b := worker.ExecutorFunc(func(ctx context.Context, task *schema.NodeTask, s worker.Slot) (*schema.NodeResult, error) {
			picked <- time.Now()
			return okResult(), nil
		})
		startWorker(t, q, b, worker.Config{ID: "b", Slots: 1})
		t0 := time.Now()
		a.stop(t)
		select {
		case at := <-picked:
			// Far below AckWait: the task was handed back, not timed out.
			require.Less(t, at.Sub(t0), 20*time.Second)
			t.Logf("handed-back task picked up by b %v after the drain began", at.Sub(t0))
		case <-ctx.Done():
			t.Fatal("the drained task was not picked up by worker b")
		}
		ws, err := q.Workers(ctx)
		require.NoError(t, err)
		for _, w := range ws {
			require.NotEqual(t, "a", w.ID, "a drained worker leaves the registry")
		}
	})
}

func TestWorkerInfraErrorsEndInDeadLetters(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv *testutil.NATS) {
		q := srv.Queue(t, queue.Options{MaxDeliver: 3})
		var calls atomic.Int64
		broken := worker.ExecutorFunc(func(ctx context.Context, task *schema.NodeTask, s worker.Slot) (*schema.NodeResult, error) {
			if calls.Add(1) == 2 {
				panic("executor bug")
			}
			return nil, errors.New("disk full")
		})
		startWorker(t, q, broken, worker.Config{Slots: 1, RetryDelay: 50 * time.Millisecond})
		outs := execAll(t, q, tasks(1))
		require.Nil(t, outs[0].Result)
		require.NotNil(t, outs[0].DeadLetter)
		require.Contains(t, outs[0].DeadLetter.Reason, "delivery 3 of 3: disk full")
		require.EqualValues(t, 3, outs[0].DeadLetter.Deliveries)
		require.EqualValues(t, 3, calls.Load())
		testutil.Eventually(t, 10*time.Second, "the dead letter to leave the work queue", func() bool {
			stats, err := q.Stats(context.Background())
			require.NoError(t, err)
			require.EqualValues(t, 1, stats[0].DeadLettered)
			return stats[0].Pending+stats[0].InFlight == 0
		})
	})
}

func TestWorkerReplacesAnUnpublishableResult(t *testing.T) {
	srv := testutil.StartNATS(t, "embedded")
	q := srv.Queue(t, queue.Options{})
	bad := worker.ExecutorFunc(func(ctx context.Context, task *schema.NodeTask, s worker.Slot) (*schema.NodeResult, error) {
		r := okResult()
		r.Metrics = map[string]float64{"": 1} // invalid metric name
		return r, nil
	})
	startWorker(t, q, bad, worker.Config{Slots: 1})
	outs := execAll(t, q, tasks(1))
	require.NotNil(t, outs[0].Result)
	require.Equal(t, schema.ErrKindInfra, outs[0].Result.Error.Kind)
	require.Contains(t, outs[0].Result.Error.Message, "metric name")
}

func TestWorkerConfigValidated(t *testing.T) {
	srv := testutil.StartNATS(t, "embedded")
	q := srv.Queue(t, queue.Options{})
	noop := worker.ExecutorFunc(func(context.Context, *schema.NodeTask, worker.Slot) (*schema.NodeResult, error) {
		return okResult(), nil
	})
	_, err := worker.New(q, noop, worker.Config{Pools: []string{"cpu", "cpu"}})
	require.ErrorIs(t, err, worker.ErrInvalidConfig)
	_, err = worker.New(q, noop, worker.Config{Pools: []string{"a b"}})
	require.ErrorIs(t, err, worker.ErrInvalidConfig)
	_, err = worker.New(q, nil, worker.Config{})
	require.ErrorIs(t, err, worker.ErrInvalidConfig)
}

func TestWorkerRequirements(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv *testutil.NATS) {
		q := srv.Queue(t, queue.Options{})
		ran := make(chan string, 4)
		exec := func(id string) worker.Executor {
			return worker.ExecutorFunc(func(ctx context.Context, task *schema.NodeTask, s worker.Slot) (*schema.NodeResult, error) {
				ran <- id
				return okResult(), nil
			})
		}
		startWorker(t, q, exec("plain"), worker.Config{ID: "plain", Slots: 1, RequeueDelay: 100 * time.Millisecond,
			Toolchains: map[string]string{"gcc": "12.2.0", "openmp": "gcc"}})

		cuda := tasks(1)[0]
		cuda.NodeID, cuda.Requires = "needs-nvcc", []string{"nvcc"}
		omp := tasks(1)[0]
		omp.NodeID, omp.Requires = "needs-openmp", []string{"openmp"}
		outs := execAll(t, q, []*schema.NodeTask{cuda, omp})
		require.True(t, outs[1].OK())
		require.NotNil(t, outs[0].DeadLetter, "nobody in the pool has nvcc")
		require.Equal(t, "no worker in pool cpu has nvcc", outs[0].DeadLetter.Reason)
		require.Equal(t, "plain", <-ran)

		// With a worker that has nvcc in the pool, the task goes to it.
		startWorker(t, q, exec("gpu"), worker.Config{ID: "gpu", Slots: 1,
			Toolchains: map[string]string{"nvcc": "12.4", "gpu": "1"}, GPUIDs: []string{"0"}})
		testutil.Eventually(t, 10*time.Second, "both workers registered", func() bool {
			ws, err := q.Workers(context.Background())
			require.NoError(t, err)
			return len(ws) == 2
		})
		cuda2 := *cuda
		cuda2.NodeID = "needs-nvcc-2"
		outs = execAll(t, q, []*schema.NodeTask{&cuda2})
		require.True(t, outs[0].OK())
		require.Equal(t, "gpu", outs[0].Result.Worker)
	})
}

func TestMissingToolchains(t *testing.T) {
	have := map[string]string{"gcc": "12", "mpicc": "12", "openmp": "gcc"}
	require.Empty(t, worker.MissingToolchains(have, nil))
	require.Equal(t, []string{"mpi", "nvcc"}, worker.MissingToolchains(have, []string{"gcc", "mpi", "nvcc"}))
	have["mpirun"] = "4.1.4"
	require.Empty(t, worker.MissingToolchains(have, []string{"mpi", "openmp"}))
}

// TestImageTaskNeedsNoHostToolchain: a task in a container image that
// requires a toolchain the worker's host lacks is run (the executor checks
// the image's); one on the host is not.
func TestImageTaskNeedsNoHostToolchain(t *testing.T) {
	srv := testutil.StartNATS(t, "embedded")
	q := srv.Queue(t, queue.Options{})
	var ran atomic.Int32
	exec := worker.ExecutorFunc(func(context.Context, *schema.NodeTask, worker.Slot) (*schema.NodeResult, error) {
		ran.Add(1)
		return okResult(), nil
	})
	startWorker(t, q, exec, worker.Config{Slots: 1, Toolchains: map[string]string{"gcc": "12"}})
	ts := tasks(1)
	ts[0].Requires = []string{"openmp"}
	ts[0].Container = &schema.Container{Image: "/images/with-openmp.sif"}
	outs := execAll(t, q, ts)
	require.True(t, outs[0].OK(), "%+v", outs[0])
	require.EqualValues(t, 1, ran.Load())
}

func TestSlotGPUs(t *testing.T) {
	got := gpusOfSlots(t, []string{"0", "1", "2", "3"})
	require.ElementsMatch(t, [][]string{{"0"}, {"1"}, {"2"}, {"3"}}, got, "4 GPUs, 4 slots: one GPU each")
}

// TestMIGSlicesAreGPUs: a worker whose GPUs are MIG instances (their
// UUIDs, as executor.GPUIDs lists a split card) hands each task its own,
// exclusively, as it does whole GPUs.
func TestMIGSlicesAreGPUs(t *testing.T) {
	migs := []string{"MIG-fb42055e-9e53-5764-9278-438605a3014c", "MIG-3d4db13e-c42d-5555-98f4-8b50389791bc", "MIG-de819d17-9382-56a2-b9ca-aec36c88014f"}
	got := gpusOfSlots(t, migs)
	require.ElementsMatch(t, [][]string{{migs[0]}, {migs[1]}, {migs[2]}}, got, "one MIG instance each")
}

// gpusOfSlots runs one task with limits.gpus 1 per GPU id on a worker with
// a slot per id, every slot busy at once, and returns the GPUs each got.
func gpusOfSlots(t *testing.T, ids []string) [][]string {
	srv := testutil.StartNATS(t, "embedded")
	q := srv.Queue(t, queue.Options{})
	var mu sync.Mutex
	var got [][]string
	exec := worker.ExecutorFunc(func(_ context.Context, _ *schema.NodeTask, s worker.Slot) (*schema.NodeResult, error) {
		mu.Lock()
		got = append(got, s.GPUs)
		mu.Unlock()
		time.Sleep(200 * time.Millisecond) //nolint:forbidigo // keep every slot busy at once
		return okResult(), nil
	})
	startWorker(t, q, exec, worker.Config{Slots: len(ids), Cores: 2 * len(ids), GPUIDs: ids})
	ts := tasks(len(ids))
	for _, task := range ts {
		task.Limits.GPUs = 1
	}
	execAll(t, q, ts)
	mu.Lock()
	defer mu.Unlock()
	return got
}

func TestWorkerIdleExit(t *testing.T) {
	srv := testutil.StartNATS(t, "embedded")
	q := srv.Queue(t, queue.Options{})
	exec := worker.ExecutorFunc(func(context.Context, *schema.NodeTask, worker.Slot) (*schema.NodeResult, error) {
		time.Sleep(700 * time.Millisecond) //nolint:forbidigo // longer than IdleExit: a running task is not idleness
		return okResult(), nil
	})
	w, err := worker.New(q, exec, worker.Config{Slots: 1, IdleExit: 400 * time.Millisecond, Logger: testutil.Logger(t)})
	require.NoError(t, err)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- w.Run(context.Background()) }()
	outs := execAll(t, q, tasks(1))
	require.True(t, outs[0].OK())
	select {
	case err := <-done:
		require.NoError(t, err)
		require.GreaterOrEqual(t, time.Since(start), 1100*time.Millisecond, "idle only after the task ended")
	case <-time.After(30 * time.Second):
		t.Fatal("an idle worker did not exit")
	}
	ws, err := q.Workers(context.Background())
	require.NoError(t, err)
	require.Empty(t, ws, "an idle worker leaves the registry")
}

// TestHandBacksDoNotUseUpDeliveries: a task drained from more workers than
// MaxDeliver allows is still run, not dead-lettered: hand-backs are not
// its fault.
func TestHandBacksDoNotUseUpDeliveries(t *testing.T) {
	srv := testutil.StartNATS(t, "embedded")
	q := srv.Queue(t, queue.Options{AckWait: time.Minute, MaxDeliver: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := q.WatchRun(ctx, "r", time.Now())
	require.NoError(t, err)
	defer w.Close()
	_, err = q.PublishTask(ctx, &schema.NodeTask{V: 1, RunID: "r", NodeID: "long", Attempt: 1, Pool: "cpu",
		Artifacts: schema.Artifacts{Run: schema.RunPhase{Commands: []string{"sleep 1000"}}}})
	require.NoError(t, err)
	for i := range 4 { // four workers drained in turn while they run it
		started := make(chan struct{}, 1)
		blocking := worker.ExecutorFunc(func(ctx context.Context, task *schema.NodeTask, s worker.Slot) (*schema.NodeResult, error) {
			started <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		})
		b := startWorker(t, q, blocking, worker.Config{ID: fmt.Sprintf("w%d", i), Slots: 1})
		select {
		case <-started:
		case <-ctx.Done():
			t.Fatalf("worker %d never got the task", i)
		}
		b.stop(t)
	}
	startWorker(t, q, worker.ExecutorFunc(func(context.Context, *schema.NodeTask, worker.Slot) (*schema.NodeResult, error) {
		return okResult(), nil
	}), worker.Config{ID: "last", Slots: 1})
	select {
	case r := <-w.Results:
		require.Equal(t, "last", r.Worker)
	case d := <-w.DeadLetters:
		t.Fatalf("dead-lettered after hand-backs: %s", d.Reason)
	case <-ctx.Done():
		t.Fatal("no result")
	}
}

// TestWorkerDeclinesWhatCannotFit: a worker whose allocation ends soon
// hands back a task whose declared limits do not fit; a worker with time
// runs it.
func TestWorkerDeclinesWhatCannotFit(t *testing.T) {
	srv := testutil.StartNATS(t, "embedded")
	q := srv.Queue(t, queue.Options{AckWait: time.Minute, MaxDeliver: 1})
	var ranShort atomic.Int64
	short := startWorker(t, q, worker.ExecutorFunc(func(context.Context, *schema.NodeTask, worker.Slot) (*schema.NodeResult, error) {
		ranShort.Add(1)
		return okResult(), nil
	}), worker.Config{ID: "short", Slots: 1, Deadline: time.Now().Add(30 * time.Second), RequeueDelay: 100 * time.Millisecond})
	_ = short
	task := tasks(1)[0]
	task.Limits.RunTimeoutS = 120
	done := make(chan []dispatch.Outcome, 1)
	go func() { done <- execAll(t, q, []*schema.NodeTask{task}) }()
	time.Sleep(time.Second) //nolint:forbidigo // the short worker declines it (more than once)
	// The registry says so, with the reason: the node is shown declined,
	// not merely queued.
	var lines []runview.NodeLine
	testutil.Eventually(t, 30*time.Second, "the decline in the registry", func() bool {
		ws, err := q.Workers(context.Background())
		require.NoError(t, err)
		run := "" // execAll names the run
		for _, w := range ws {
			for _, d := range w.Declined {
				run = d.Run
			}
		}
		lines = []runview.NodeLine{{Node: task.NodeID, Status: schema.NodeQueued, Attempt: task.Attempt}}
		runview.FillRunning(lines, run, ws)
		return lines[0].Status == schema.NodeDeclined
	})
	require.Regexp(t, `^declined by worker short \d+s ago: its time limits \(2m\d*s?\) do not fit in the \d+s left of the worker's walltime; a worker takes it with at least 2m10s left: ask for at least 6 minutes \(sbatch --time=6\); waiting for a worker that can run it$`, lines[0].Reason)
	startWorker(t, q, worker.ExecutorFunc(func(context.Context, *schema.NodeTask, worker.Slot) (*schema.NodeResult, error) {
		return okResult(), nil
	}), worker.Config{ID: "long", Slots: 1})
	outs := <-done
	require.NotNil(t, outs[0].Result, "not dead-lettered although MaxDeliver is 1: declining uses up no delivery")
	require.Equal(t, "long", outs[0].Result.Worker)
	require.Zero(t, ranShort.Load())
	ws, err := q.Workers(context.Background())
	require.NoError(t, err)
	for _, w := range ws {
		if w.ID == "short" {
			require.False(t, w.Deadline.IsZero(), "the deadline is in the registry")
		}
	}
}

// TestWorkerSaysItsResultWasStoredBefore: a task run again after its first
// result was stored (an ack lost in an election) is answered, and the
// worker says its second result was dropped.
func TestWorkerSaysItsResultWasStoredBefore(t *testing.T) {
	ctx := context.Background()
	srv := testutil.StartNATS(t, "embedded")
	q := srv.Queue(t, queue.Options{})
	first := okResult()
	first.V, first.RunID, first.NodeID, first.Attempt, first.Pool, first.Worker = schema.Version, "r", "again", 1, "cpu", "w-before"
	dup, err := q.PublishResult(ctx, first)
	require.NoError(t, err)
	require.False(t, dup)
	_, err = q.PublishTask(ctx, &schema.NodeTask{V: 1, RunID: "r", NodeID: "again", Attempt: 1, Pool: "cpu",
		Artifacts: schema.Artifacts{Run: schema.RunPhase{Commands: []string{"true"}}}})
	require.NoError(t, err)
	var logs testutil.Buffer
	ran := make(chan struct{}, 1)
	exec := worker.ExecutorFunc(func(context.Context, *schema.NodeTask, worker.Slot) (*schema.NodeResult, error) {
		ran <- struct{}{}
		return okResult(), nil
	})
	w, err := worker.New(q, exec, worker.Config{Slots: 1, Pools: []string{"cpu"}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	<-ran
	testutil.Eventually(t, 10*time.Second, "the worker's word on the dropped result", func() bool {
		return strings.Contains(logs.String(), "result already stored for this attempt")
	})
	require.Contains(t, logs.String(), "node_id=again")
	cancel()
	require.NoError(t, <-done)
}
