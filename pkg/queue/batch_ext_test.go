package queue_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/schema"
)

// enqueueAndFetch publishes n tasks of run, starts watching its results,
// and fetches the n deliveries through c.
func enqueueAndFetch(t *testing.T, ctx context.Context, q *queue.Queue, c *queue.PoolConsumer, run string, n int) (*queue.Watch, []*queue.Delivery) {
	t.Helper()
	var tasks []*schema.NodeTask
	for i := range n {
		tasks = append(tasks, task(run, "n"+strconv.Itoa(i)))
	}
	_, err := q.PublishTasks(ctx, tasks)
	require.NoError(t, err)
	w, err := q.WatchRun(ctx, run, time.Now())
	require.NoError(t, err)
	t.Cleanup(w.Close)
	ds := fetchAll(t, c, n)
	require.Len(t, ds, n)
	return w, ds
}

// answerAll publishes a result for every delivery at once, each from its
// own goroutine as a worker's slots do, and acks it after. Each result's
// run phase carries logTail.
func answerAll(t *testing.T, ds []*queue.Delivery, logTail string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(ds))
	for _, d := range ds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &schema.NodeResult{V: 1, RunID: d.Task.RunID, NodeID: d.Task.NodeID, Attempt: d.Task.Attempt, Pool: d.Task.Pool, Worker: "w",
				Phases: []schema.PhaseResult{{Name: schema.PhaseRun, OK: true, LogTail: logTail}}}
			if _, err := d.PublishResult(context.Background(), r); err != nil {
				errs <- err
				return
			}
			errs <- d.Ack()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// collect reads n results from w, then checks that no more come.
func collect(t *testing.T, ctx context.Context, w *queue.Watch, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		select {
		case r := <-w.Results:
			got[r.NodeID]++
		case <-ctx.Done():
			t.Fatalf("%d of %d results arrived", len(got), n)
		}
	}
	select {
	case r := <-w.Results:
		t.Fatalf("unexpected extra result %s/%d", r.NodeID, r.Attempt)
	case <-time.After(300 * time.Millisecond):
	}
	return got
}

// resultMsgs are the messages of run's results subject: how many, and how
// many of them are batches.
func resultMsgs(t *testing.T, q *queue.Queue, run string) (msgs, batches int) {
	t.Helper()
	ctx := ctxT(t)
	c, err := q.JetStream().OrderedConsumer(ctx, queue.ResultsStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{queue.ResultSubject(run)}})
	require.NoError(t, err)
	for {
		m, err := c.Next(jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return msgs, batches
		}
		msgs++
		if m.Headers().Get("Hpcq-Batch") != "" {
			batches++
		}
	}
}

// TestResultsBatched: results ending together travel as few messages, and
// the watch delivers each once; results of a task from an older build (no
// Hpcq-Reads-Batches header) travel alone, as that build reads them.
func TestResultsBatched(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv *testutil.NATS) {
		ctx := ctxT(t)
		q := srv.Queue(t, queue.Options{})
		// A result that ends alone travels alone, in the single-result format.
		_, err := q.PublishTask(ctx, task("solo", "a"))
		require.NoError(t, err)
		c, err := q.PoolConsumer(ctx, "cpu", "w")
		require.NoError(t, err)
		answerAll(t, fetchAll(t, c, 1), "")
		msgs, batches := resultMsgs(t, q, "solo")
		require.Equal(t, [2]int{1, 0}, [2]int{msgs, batches})

		const n = 300
		w, ds := enqueueAndFetch(t, ctx, q, c, "new", n)
		answerAll(t, ds, "")
		got := collect(t, ctx, w, n)
		require.Len(t, got, n, "every result once")
		msgs, batches = resultMsgs(t, q, "new")
		t.Logf("%d results in %d messages, %d of them batches", n, msgs, batches)
		require.Less(t, msgs, n, "results ending together are batched")
		require.Positive(t, batches)
		requireEmptyWorkQueue(t, q)

		// The same results again (tasks run again after lost acks): stored
		// or not, the watch delivers none of them twice.
		for _, d := range ds {
			_, err := d.PublishResult(ctx, &schema.NodeResult{V: 1, RunID: "new", NodeID: d.Task.NodeID, Attempt: 1, Pool: "cpu", Worker: "w2"})
			require.NoError(t, err)
		}
		collect(t, ctx, w, 0)

		// Tasks as an older build publishes them: no header.
		old, err := q.WatchRun(ctx, "old", time.Now())
		require.NoError(t, err)
		defer old.Close()
		for i := range 50 {
			data, err := json.Marshal(task("old", "o"+strconv.Itoa(i)))
			require.NoError(t, err)
			_, err = q.JetStream().Publish(ctx, queue.TaskSubject("cpu", "old"), data)
			require.NoError(t, err)
		}
		ds = fetchAll(t, c, 50)
		require.Len(t, ds, 50)
		answerAll(t, ds, "")
		require.Len(t, collect(t, ctx, old, 50), 50)
		msgs, batches = resultMsgs(t, q, "old")
		require.Equal(t, 50, msgs, "one message per result for a build that does not read batches")
		require.Zero(t, batches)
	})
}

// TestBadBatch: a batch with a line that is not a valid result, or a count
// that does not match its lines, gives the watch every valid result in it
// (each error is logged).
func TestBadBatch(t *testing.T) {
	srv := testutil.StartNATS(t, "embedded")
	ctx := ctxT(t)
	q := srv.Queue(t, queue.Options{})
	w, err := q.WatchRun(ctx, "r", time.Now())
	require.NoError(t, err)
	defer w.Close()
	line := func(node string) string {
		data, err := json.Marshal(&schema.NodeResult{V: 1, RunID: "r", NodeID: node, Attempt: 1, Worker: "w"})
		require.NoError(t, err)
		return string(data)
	}
	for i, c := range []struct{ count, data string }{
		{"3", line("a") + "\n{\"v\":1,\"bogus\":true}\n" + line("b")},
		{"2", line("c") + "\n" + line("d") + "\n" + line("e")}, // one line more than it says
		{"5", line("f")},                   // fewer
		{"x", line("g")},                   // no count
		{"", line("h") + "\n" + line("i")}, // no header: not a result
	} {
		m := nats.NewMsg(queue.ResultSubject("r"))
		m.Data = []byte(c.data)
		if c.count != "" {
			m.Header.Set("Hpcq-Batch", c.count)
		}
		m.Header.Set(jetstream.MsgIDHeader, "bad-"+strconv.Itoa(i))
		_, err := q.JetStream().PublishMsg(ctx, m)
		require.NoError(t, err)
	}
	got := collect(t, ctx, w, 7)
	require.Equal(t, map[string]int{"a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "f": 1, "g": 1}, got)
}

// TestBatchesFitTheServersMaxPayload: on a server whose max_payload is
// lower than a batch's bound, batches shrink to fit, and every result
// arrives (a batch over the limit would be refused on every retry); a
// single message over the limit is refused before it is sent.
func TestBatchesFitTheServersMaxPayload(t *testing.T) {
	srv, err := server.NewServer(&server.Options{JetStream: true, StoreDir: t.TempDir(), DontListen: true,
		NoSigs: true, NoLog: true, MaxPayload: 64 << 10})
	require.NoError(t, err)
	go srv.Start()
	require.True(t, srv.ReadyForConnections(10*time.Second))
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect("", nats.InProcessServer(srv))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	ctx := ctxT(t)
	q, err := queue.New(ctx, nc, queue.Options{}, testutil.Logger(t))
	require.NoError(t, err)

	c, err := q.PoolConsumer(ctx, "cpu", "w")
	require.NoError(t, err)
	const n = 100
	w, ds := enqueueAndFetch(t, ctx, q, c, "small", n)
	answerAll(t, ds, strings.Repeat("x", 10<<10)) // 10 KiB of log tail per result: 6 fit in 64 KiB
	require.Len(t, collect(t, ctx, w, n), n)
	msgs, batches := resultMsgs(t, q, "small")
	t.Logf("%d results in %d messages, %d of them batches", n, msgs, batches)
	require.Positive(t, batches)

	// A task or a result the server would refuse is refused at once, saying
	// why, as an invalid message: a worker then reports the node's fate
	// instead of asking again forever.
	big := task("small", "big")
	big.Artifacts.Coding.Workspace.Files = []schema.File{{Path: "data.txt", Content: strings.Repeat("x", 100<<10)}}
	_, err = q.PublishTask(ctx, big)
	require.ErrorIs(t, err, schema.ErrInvalidMessage)
	require.ErrorContains(t, err, "max_payload")
	outs, err := q.PublishTasks(ctx, []*schema.NodeTask{big})
	require.ErrorIs(t, err, schema.ErrInvalidMessage)
	require.ErrorIs(t, outs[0].Err, schema.ErrInvalidMessage)
	_, err = q.PublishResult(ctx, &schema.NodeResult{V: 1, RunID: "small", NodeID: "big", Attempt: 1, Worker: "w",
		Phases: []schema.PhaseResult{{Name: schema.PhaseRun, LogTail: strings.Repeat("x", 100<<10)}}})
	require.ErrorIs(t, err, schema.ErrInvalidMessage)
	require.ErrorContains(t, err, "max_payload")
	t.Log(err)
}
