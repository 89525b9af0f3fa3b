package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/queue/embedded"
	"github.com/hpcq/hpcq/pkg/schema"
)

func task(run, node string) *schema.NodeTask {
	return &schema.NodeTask{V: 1, RunID: run, NodeID: node, Attempt: 1, Pool: "cpu",
		Artifacts: schema.Artifacts{Run: schema.RunPhase{Commands: []string{"true"}}}}
}

// forEachServer runs fn against the embedded server and the nats-server
// binary.
func forEachServer(t *testing.T, fn func(t *testing.T, srv *testutil.NATS)) {
	for _, kind := range testutil.ServerKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			fn(t, testutil.StartNATS(t, kind))
		})
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func streamMsgs(t *testing.T, q *queue.Queue, name string) uint64 {
	t.Helper()
	s, err := q.JetStream().Stream(context.Background(), name)
	require.NoError(t, err)
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	return info.State.Msgs
}

// requireEmptyWorkQueue waits for the tasks stream to empty: acks and
// terminations are not confirmed, so the server applies them a moment after
// the client sent them.
func requireEmptyWorkQueue(t *testing.T, q *queue.Queue) {
	t.Helper()
	require.NoError(t, q.Flush(context.Background()))
	testutil.Eventually(t, 10*time.Second, "an empty work queue", func() bool {
		return streamMsgs(t, q, queue.TasksStream) == 0
	})
}

func TestStreamsCreatedIdempotently(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv *testutil.NATS) {
		ctx := ctxT(t)
		q := srv.Queue(t, queue.Options{})
		q2 := srv.Queue(t, queue.Options{AckWait: 30 * time.Second}) // a second process starting
		_, err := q2.PublishTask(ctx, task("r1", "a"))
		require.NoError(t, err)
		srv.Queue(t, queue.Options{}) // and a third: nothing lost
		require.EqualValues(t, 1, streamMsgs(t, q, queue.TasksStream))

		s, err := q.JetStream().Stream(ctx, queue.TasksStream)
		require.NoError(t, err)
		info, err := s.Info(ctx)
		require.NoError(t, err)
		require.Equal(t, jetstream.WorkQueuePolicy, info.Config.Retention)
		require.Equal(t, jetstream.FileStorage, info.Config.Storage)
		require.Equal(t, []string{"hpcq.tasks.*.*"}, info.Config.Subjects)
		for name, subj := range map[string]string{queue.ResultsStream: "hpcq.results.*", queue.DLQStream: "hpcq.dlq.*"} {
			s, err := q.JetStream().Stream(ctx, name)
			require.NoError(t, err)
			require.Equal(t, []string{subj}, s.CachedInfo().Config.Subjects)
			require.Equal(t, jetstream.LimitsPolicy, s.CachedInfo().Config.Retention)
		}
		// The pool consumer is durable, shared, explicit-ack, with AckWait.
		_, err = q.PoolConsumer(ctx, "cpu", "w1")
		require.NoError(t, err)
		_, err = q2.PoolConsumer(ctx, "cpu", "w2") // second worker, same consumer
		require.NoError(t, err)
		c, err := q.JetStream().Consumer(ctx, queue.TasksStream, queue.ConsumerName("cpu"))
		require.NoError(t, err)
		ci := c.CachedInfo()
		require.Equal(t, "hpcq.tasks.cpu.*", ci.Config.FilterSubject)
		require.Equal(t, jetstream.AckExplicitPolicy, ci.Config.AckPolicy)
		// The consumer follows the config of the process that set it up last:
		// every process of a cluster must share HPCQ_ACK_WAIT.
		require.Equal(t, 30*time.Second, ci.Config.AckWait)
		_, err = q.PoolConsumer(ctx, "cpu", "w1")
		require.NoError(t, err)
		ci2, err := c.Info(ctx)
		require.NoError(t, err)
		require.Equal(t, 60*time.Second, ci2.Config.AckWait)
	})
}

// TestStreamsDeclaredAtOnce: every process of a run declares the streams
// and buckets at start, the scheduler and a worker of a Slurm job within
// the same millisecond. nats-server 2.9.10 crashed when one's update met
// the other's create; declared on a fresh server again and again, the
// server lives and every process gets its queue.
func TestStreamsDeclaredAtOnce(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv *testutil.NATS) {
		ctx := ctxT(t)
		admin := srv.Connect(t)
		js, err := jetstream.New(admin)
		require.NoError(t, err)
		for round := range 40 {
			errs := make(chan error, 3)
			for range cap(errs) {
				go func() {
					nc, err := nats.Connect(srv.URL)
					if err != nil {
						errs <- err
						return
					}
					defer nc.Close()
					_, err = queue.New(ctx, nc, queue.Options{}, testutil.Logger(t))
					errs <- err
				}()
			}
			for range cap(errs) {
				require.NoError(t, <-errs, "round %d", round)
			}
			if srv.PID != 0 {
				require.False(t, testutil.ProcessGone(srv.PID), "nats-server exited in round %d", round)
			}
			for name := range js.StreamNames(ctx).Name() {
				require.NoError(t, js.DeleteStream(ctx, name))
			}
		}
	})
}

// TestStreamsUpdatedWhenTheirConfigChanged: a process whose options differ
// from the streams' (a site that raised the results' retention) updates
// them; creating first does not leave the old configuration in place.
func TestStreamsUpdatedWhenTheirConfigChanged(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv *testutil.NATS) {
		ctx := ctxT(t)
		srv.Queue(t, queue.Options{ResultsMaxAge: time.Hour})
		q := srv.Queue(t, queue.Options{ResultsMaxAge: 2 * time.Hour})
		s, err := q.JetStream().Stream(ctx, queue.ResultsStream)
		require.NoError(t, err)
		require.Equal(t, 2*time.Hour, s.CachedInfo().Config.MaxAge)
	})
}

func TestPublishDeduplicates(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv *testutil.NATS) {
		ctx := ctxT(t)
		q := srv.Queue(t, queue.Options{})
		dup, err := q.PublishTask(ctx, task("r1", "a"))
		require.NoError(t, err)
		require.False(t, dup)
		dup, err = q.PublishTask(ctx, task("r1", "a"))
		require.NoError(t, err)
		require.True(t, dup, "a republish within the dedup window is a no-op")
		outs, err := q.PublishTasks(ctx, []*schema.NodeTask{task("r1", "a"), task("r1", "b"), task("r1", "b")})
		require.NoError(t, err)
		require.True(t, outs[0].Duplicate)
		require.False(t, outs[1].Duplicate)
		require.True(t, outs[2].Duplicate)
		require.EqualValues(t, 2, streamMsgs(t, q, queue.TasksStream))

		// A new attempt of the same node is a new task.
		t2 := task("r1", "a")
		t2.Attempt = 2
		dup, err = q.PublishTask(ctx, t2)
		require.NoError(t, err)
		require.False(t, dup)

		// Results are deduplicated the same way.
		r := &schema.NodeResult{V: 1, RunID: "r1", NodeID: "a", Attempt: 1, Worker: "w"}
		dup, err = q.PublishResult(ctx, r)
		require.NoError(t, err)
		require.False(t, dup)
		dup, err = q.PublishResult(ctx, r)
		require.NoError(t, err)
		require.True(t, dup)

		// Invalid tasks never reach the server.
		bad := task("r1", "c")
		bad.V = 2
		_, err = q.PublishTask(ctx, bad)
		require.ErrorIs(t, err, schema.ErrUnknownVersion)
	})
}

func fetchAll(t *testing.T, c *queue.PoolConsumer, n int) []*queue.Delivery {
	t.Helper()
	var out []*queue.Delivery
	_, err := c.Fetch(context.Background(), n, 500*time.Millisecond, func(d *queue.Delivery) { out = append(out, d) })
	require.NoError(t, err)
	return out
}

func TestPoisonMessagesAreDeadLettered(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv *testutil.NATS) {
		ctx := ctxT(t)
		q := srv.Queue(t, queue.Options{})
		c, err := q.PoolConsumer(ctx, "cpu", "w1")
		require.NoError(t, err)
		js := q.JetStream()
		poison := map[string]string{
			"garbage":         "this is not json",
			"unknown version": `{"v":9,"run_id":"r","node_id":"v9","attempt":1,"pool":"cpu"}`,
			"missing field":   `{"v":1,"run_id":"r","node_id":"nopool","attempt":1,"artifacts":{"run":{"commands":["x"]}}}`,
			"wrong pool":      `{"v":1,"run_id":"r","node_id":"gpu","attempt":1,"pool":"gpu","artifacts":{"run":{"commands":["x"]}}}`,
			"wrong run":       `{"v":1,"run_id":"other","node_id":"x","attempt":1,"pool":"cpu","artifacts":{"run":{"commands":["x"]}}}`,
		}
		for _, body := range poison {
			_, err := js.Publish(ctx, "hpcq.tasks.cpu.r", []byte(body))
			require.NoError(t, err)
		}
		good, err := json.Marshal(task("r", "good"))
		require.NoError(t, err)
		_, err = js.Publish(ctx, "hpcq.tasks.cpu.r", good)
		require.NoError(t, err)

		got := fetchAll(t, c, 10)
		require.Len(t, got, 1, "only the valid task reaches the worker")
		require.Equal(t, "good", got[0].Task.NodeID)
		require.NoError(t, got[0].Ack())
		require.NoError(t, q.Flush(ctx))

		requireEmptyWorkQueue(t, q)
		dls, err := q.DeadLetters(ctx, "cpu", 0)
		require.NoError(t, err)
		require.Len(t, dls, len(poison))
		reasons := map[string]queue.DeadLetter{}
		for _, d := range dls {
			require.EqualValues(t, 1, d.Deliveries)
			require.Equal(t, "cpu", d.Pool)
			require.Equal(t, "w1", d.Worker)
			reasons[string(d.Data)] = d
		}
		require.Contains(t, reasons[poison["garbage"]].Reason, "not a JSON object")
		require.Contains(t, reasons[poison["unknown version"]].Reason, "unknown version: v: 9")
		require.Equal(t, "v9", reasons[poison["unknown version"]].NodeID)
		require.Contains(t, reasons[poison["missing field"]].Reason, "pool: is required")
		require.Contains(t, reasons[poison["wrong pool"]].Reason, `pool: "gpu", run_id: "r", but the task arrived on hpcq.tasks.cpu.r`)
		require.Contains(t, reasons[poison["wrong run"]].Reason, `pool: "cpu", run_id: "other", but the task arrived on hpcq.tasks.cpu.r`)

		stats, err := q.Stats(ctx)
		require.NoError(t, err)
		require.Len(t, stats, 1)
		require.EqualValues(t, len(poison), stats[0].DeadLettered)
		require.EqualValues(t, 0, stats[0].Pending)
	})
}

func TestMaxDeliverDeadLetters(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv *testutil.NATS) {
		ctx := ctxT(t)
		q := srv.Queue(t, queue.Options{MaxDeliver: 3, AckWait: time.Second})
		c, err := q.PoolConsumer(ctx, "cpu", "w1")
		require.NoError(t, err)
		_, err = q.PublishTask(ctx, task("r", "flaky"))
		require.NoError(t, err)
		for i := 1; i <= 3; i++ {
			got := fetchAll(t, c, 1)
			require.Len(t, got, 1, "delivery %d", i)
			require.EqualValues(t, i, got[0].NumDelivered)
			require.Equal(t, i == 3, got[0].LastDelivery())
			require.NoError(t, got[0].Nak()) // a worker gave it back (or died)
		}
		require.Empty(t, fetchAll(t, c, 1), "the delivery past MaxDeliver is dead-lettered, not handed out")
		requireEmptyWorkQueue(t, q)
		dls, err := q.DeadLetters(ctx, "", 0)
		require.NoError(t, err)
		require.Len(t, dls, 1)
		require.EqualValues(t, 4, dls[0].Deliveries)
		require.Contains(t, dls[0].Reason, "max deliveries reached: delivered 4 times, MaxDeliver is 3")
		require.Equal(t, "flaky", dls[0].NodeID)
		require.Equal(t, 1, dls[0].Attempt)
		require.Equal(t, "r", dls[0].RunID)
	})
}

func TestAckWaitRedeliveryAndInProgress(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv *testutil.NATS) {
		ctx := ctxT(t)
		ackWait := time.Second
		q := srv.Queue(t, queue.Options{AckWait: ackWait})
		c, err := q.PoolConsumer(ctx, "cpu", "w1")
		require.NoError(t, err)
		_, err = q.PublishTask(ctx, task("r", "slow"))
		require.NoError(t, err)

		// Heartbeats at a third of AckWait keep the delivery alive well past
		// AckWait.
		got := fetchAll(t, c, 1)
		require.Len(t, got, 1)
		stop := time.Now().Add(3 * ackWait)
		for time.Now().Before(stop) {
			require.NoError(t, got[0].InProgress())
			time.Sleep(ackWait / 3) //nolint:forbidigo // heartbeats at their period
		}
		var none []*queue.Delivery
		_, err = c.Fetch(ctx, 1, 100*time.Millisecond, func(d *queue.Delivery) { none = append(none, d) })
		require.NoError(t, err)
		require.Empty(t, none, "a heartbeated task is not redelivered")

		// Silence: the task comes back after AckWait.
		var again []*queue.Delivery
		testutil.Eventually(t, 10*ackWait, "redelivery after AckWait", func() bool {
			again = fetchAll(t, c, 1)
			return len(again) == 1
		})
		require.EqualValues(t, 2, again[0].NumDelivered)
		require.NoError(t, again[0].Ack())
		require.NoError(t, q.Flush(ctx))
		requireEmptyWorkQueue(t, q)
	})
}

func TestWatchRunDeliversEachResultOnce(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv *testutil.NATS) {
		ctx := ctxT(t)
		q := srv.Queue(t, queue.Options{DedupWindow: time.Second})
		w, err := q.WatchRun(ctx, "r", time.Now())
		require.NoError(t, err)
		defer w.Close()
		r := &schema.NodeResult{V: 1, RunID: "r", NodeID: "a", Attempt: 1, Worker: "w"}
		_, err = q.PublishResult(ctx, r)
		require.NoError(t, err)
		time.Sleep(1200 * time.Millisecond) //nolint:forbidigo // past the dedup window: the server stores it again
		dup, err := q.PublishResult(ctx, r)
		require.NoError(t, err)
		require.False(t, dup)
		other := &schema.NodeResult{V: 1, RunID: "other", NodeID: "a", Attempt: 1, Worker: "w"}
		_, err = q.PublishResult(ctx, other)
		require.NoError(t, err)
		r2 := *r
		r2.NodeID = "b"
		_, err = q.PublishResult(ctx, &r2)
		require.NoError(t, err)

		var got []string
		for len(got) < 2 {
			select {
			case res := <-w.Results:
				got = append(got, res.NodeID)
			case <-ctx.Done():
				t.Fatal("results did not arrive")
			}
		}
		require.Equal(t, []string{"a", "b"}, got)
		select {
		case res := <-w.Results:
			t.Fatalf("unexpected extra result %+v", res)
		case <-time.After(300 * time.Millisecond):
		}
	})
}

func TestRegistryReportsLostWorkers(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv *testutil.NATS) {
		ctx := ctxT(t)
		period := 250 * time.Millisecond
		q := srv.Queue(t, queue.Options{HeartbeatPeriod: period})
		reg, err := q.RegisterWorker(ctx, queue.WorkerInfo{ID: "alive", Host: "h", Pools: []string{"cpu"}, Slots: 2, Cores: 2,
			Toolchains: map[string]string{"gcc": "12.2.0"}, Version: "test"})
		require.NoError(t, err)
		// A worker that wrote its entry once and died: no more heartbeats.
		kv, err := q.JetStream().KeyValue(ctx, queue.WorkersBucket)
		require.NoError(t, err)
		dead, _ := json.Marshal(queue.WorkerInfo{ID: "dead", Pools: []string{"cpu", "gpu"}, HeartbeatMS: period.Milliseconds()})
		_, err = kv.Put(ctx, "dead", dead)
		require.NoError(t, err)

		testutil.Eventually(t, 20*period, "the silent worker to be reported lost", func() bool {
			ws, err := q.Workers(ctx)
			require.NoError(t, err)
			return len(ws) == 2 && ws[1].ID == "dead" && ws[1].Lost
		})
		ws, err := q.Workers(ctx)
		require.NoError(t, err)
		require.Equal(t, "alive", ws[0].ID)
		require.False(t, ws[0].Lost, "a heartbeating worker is live (silent for %v)", ws[0].SilentFor)
		require.Equal(t, "12.2.0", ws[0].Toolchains["gcc"])
		require.Equal(t, []string{"cpu"}, ws[0].Pools)
		require.False(t, ws[0].Started.IsZero())

		stats, err := q.Stats(ctx)
		require.NoError(t, err)
		byPool := map[string]queue.PoolStats{}
		for _, s := range stats {
			byPool[s.Pool] = s
		}
		require.Equal(t, 1, byPool["cpu"].Workers)
		require.Equal(t, 1, byPool["cpu"].LostWorkers)
		require.Equal(t, 1, byPool["gpu"].LostWorkers)

		require.NoError(t, reg.Close(ctx))
		ws, err = q.Workers(ctx)
		require.NoError(t, err)
		require.Len(t, ws, 1, "a stopped worker leaves the registry")

		_, err = q.RegisterWorker(ctx, queue.WorkerInfo{ID: "bad id!", Pools: []string{"cpu"}})
		require.ErrorIs(t, err, queue.ErrInvalidWorker)
	})
}

func TestStatsCountsPendingAndInFlight(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv *testutil.NATS) {
		ctx := ctxT(t)
		q := srv.Queue(t, queue.Options{})
		for i := range 5 {
			_, err := q.PublishTask(ctx, task("r", fmt.Sprintf("n%d", i)))
			require.NoError(t, err)
		}
		gpu := task("r", "g")
		gpu.Pool = "gpu"
		_, err := q.PublishTask(ctx, gpu) // a pool nobody consumes yet
		require.NoError(t, err)
		c, err := q.PoolConsumer(ctx, "cpu", "w")
		require.NoError(t, err)
		got := fetchAll(t, c, 2)
		require.Len(t, got, 2)
		stats, err := q.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, []queue.PoolStats{
			{Pool: "cpu", Pending: 3, InFlight: 2},
			{Pool: "gpu", Pending: 1},
		}, stats)
	})
}

func TestOptionsValidated(t *testing.T) {
	srv := testutil.StartNATS(t, "embedded")
	nc := srv.Connect(t)
	_, err := queue.New(context.Background(), nc, queue.Options{AckWait: time.Millisecond}, nil)
	require.ErrorIs(t, err, queue.ErrInvalidOption)
	require.Contains(t, err.Error(), "AckWait")
	_, err = queue.New(context.Background(), nc, queue.Options{MaxDeliver: -1}, nil)
	require.ErrorIs(t, err, queue.ErrInvalidOption)
	_, err = queue.Connect(context.Background(), queue.ConnConfig{}, nil)
	require.ErrorIs(t, err, queue.ErrInvalidOption)
	_, err = queue.Connect(context.Background(), queue.ConnConfig{URL: srv.URL, Token: "t", User: "u"}, nil)
	require.ErrorContains(t, err, "more than one")
}

// TestEmbeddedStoreLocked: a second embedded server on a store in use is
// refused (it would corrupt the files); once the first stops, it starts.
func TestEmbeddedStoreLocked(t *testing.T) {
	dir := t.TempDir()
	a, err := embedded.Start(embedded.Options{StoreDir: dir})
	require.NoError(t, err)
	_, err = embedded.Start(embedded.Options{StoreDir: dir})
	require.ErrorIs(t, err, embedded.ErrStoreInUse)
	a.Shutdown()
	b, err := embedded.Start(embedded.Options{StoreDir: dir})
	require.NoError(t, err)
	b.Shutdown()
}

// TestNewOutlivesServerRestart: a process whose server goes away as it
// starts (connected, nothing declared or looked up yet) and comes back on
// the same address finishes its start: New asks again within its budget
// rather than fail (the slurm-bridge and the workers start so, looking up
// what exists).
func TestNewOutlivesServerRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, err := embedded.Start(embedded.Options{StoreDir: dir, Listen: true})
	require.NoError(t, err)
	url := a.ClientURL()
	_, portText, err := net.SplitHostPort(strings.TrimPrefix(url, "nats://"))
	require.NoError(t, err)
	port, err := strconv.Atoi(portText)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	first, err := queue.Dial(ctx, queue.ConnConfig{URL: url, Name: "declares"}, queue.Options{}, nil)
	require.NoError(t, err)
	first.Close()

	nc, err := queue.Connect(ctx, queue.ConnConfig{URL: url, Name: "starts"}, nil)
	require.NoError(t, err)
	defer nc.Close()
	a.Shutdown()
	restarted := make(chan *embedded.Server, 1)
	go func() {
		defer close(restarted)
		// Past a lookup's try and a declaration's (4 s each): New's
		// first two requests go unanswered.
		time.Sleep(9 * time.Second) //nolint:forbidigo // the server is away for the client's first two tries
		b, err := embedded.Start(embedded.Options{StoreDir: dir, Listen: true, Port: port})
		if err != nil {
			t.Errorf("restart on port %d: %v", port, err)
			return
		}
		restarted <- b
	}()
	start := time.Now()
	q, err := queue.New(ctx, nc, queue.Options{UseExisting: true}, nil)
	if b := <-restarted; b != nil {
		t.Cleanup(b.Shutdown)
	}
	require.NoError(t, err, "New gave up after %s", time.Since(start))
	require.Greater(t, time.Since(start), 9*time.Second, "New returned before the server was back")
	_, err = q.PublishTask(ctx, task("r", "n1"))
	require.NoError(t, err)
	require.EqualValues(t, 1, streamMsgs(t, q, queue.TasksStream))
}

// TestWatchRunStartsAgain: a results watch whose consumer stopped reading
// while newer results are stored starts again from the last one it read:
// the next result arrives, the earlier one not twice.
func TestWatchRunStartsAgain(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv *testutil.NATS) {
		ctx := ctxT(t)
		q := srv.Queue(t, queue.Options{})
		w, err := q.WatchRun(ctx, "r", time.Now())
		require.NoError(t, err)
		defer w.Close()
		a := &schema.NodeResult{V: 1, RunID: "r", NodeID: "a", Attempt: 1, Worker: "w"}
		_, err = q.PublishResult(ctx, a)
		require.NoError(t, err)
		require.Equal(t, "a", (<-w.Results).NodeID)
		w.StopResultsConsumer()
		b := *a
		b.NodeID = "b"
		_, err = q.PublishResult(ctx, &b)
		require.NoError(t, err)
		select {
		case res := <-w.Results:
			require.Equal(t, "b", res.NodeID)
		case <-time.After(time.Minute):
			t.Fatal("the watch did not start again")
		}
	})
}

// TestAckConfirmed: a confirmed ack has removed the task when it returns;
// with the server gone it gives up at ctx's deadline with an error.
func TestAckConfirmed(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv *testutil.NATS) {
		ctx := ctxT(t)
		q := srv.Queue(t, queue.Options{})
		c, err := q.PoolConsumer(ctx, "cpu", "w1")
		require.NoError(t, err)
		for _, n := range []string{"a", "b"} {
			_, err = q.PublishTask(ctx, task("r", n))
			require.NoError(t, err)
		}
		got := fetchAll(t, c, 2)
		require.Len(t, got, 2)
		require.NoError(t, got[0].AckConfirmed(ctx))
		require.EqualValues(t, 1, streamMsgs(t, q, queue.TasksStream), "removed before AckConfirmed returned")
		require.ErrorIs(t, got[0].AckConfirmed(ctx), jetstream.ErrMsgAlreadyAckd)

		srv.Stop()
		short, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		defer cancel()
		require.Error(t, got[1].AckConfirmed(short), "no server to confirm it")
	})
}

// TestUseExisting: with UseExisting, streams that exist are used as they
// are (a worker's user may not change them); missing ones are created.
func TestUseExisting(t *testing.T) {
	srv := testutil.StartNATS(t, "embedded")
	ctx := ctxT(t)
	nc := srv.Connect(t)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: queue.TasksStream, Subjects: []string{"hpcq.tasks.*.*"},
		Retention: jetstream.WorkQueuePolicy, Description: "made by hand"})
	require.NoError(t, err)

	q, err := queue.New(ctx, nc, queue.Options{UseExisting: true}, nil)
	require.NoError(t, err)
	info, err := js.Stream(ctx, queue.TasksStream)
	require.NoError(t, err)
	require.Equal(t, "made by hand", info.CachedInfo().Config.Description, "an existing stream is left as it is")
	_, err = js.Stream(ctx, queue.ResultsStream)
	require.NoError(t, err, "a missing stream is created")
	_, err = q.PoolConsumer(ctx, "cpu", "w1")
	require.NoError(t, err)

	_, err = queue.New(ctx, nc, queue.Options{}, nil)
	require.NoError(t, err)
	info, err = js.Stream(ctx, queue.TasksStream)
	require.NoError(t, err)
	require.NotEqual(t, "made by hand", info.CachedInfo().Config.Description, "without UseExisting, the scheduler's settings apply")
}

// TestAddDeclined: a worker advertises each declined task once (its
// latest decline), at most MaxDeclined of them, none older than
// DeclinedFor.
func TestAddDeclined(t *testing.T) {
	var i queue.WorkerInfo
	t0 := time.Now()
	i.AddDeclined(queue.DeclinedTask{Run: "r", Node: "old", At: t0})
	for n := range queue.MaxDeclined + 4 {
		i.AddDeclined(queue.DeclinedTask{Run: "r", Node: fmt.Sprint("n", n%(queue.MaxDeclined+2)), Reason: fmt.Sprint(n), At: t0.Add(queue.DeclinedFor)})
	}
	require.Len(t, i.Declined, queue.MaxDeclined)
	seen := map[string]bool{}
	for _, d := range i.Declined {
		require.False(t, seen[d.Node], "one entry per task")
		seen[d.Node] = true
		require.NotEqual(t, "old", d.Node, "past DeclinedFor")
	}
	last := i.Declined[len(i.Declined)-1]
	require.Equal(t, fmt.Sprint(queue.MaxDeclined+3), last.Reason, "the newest last")
}
