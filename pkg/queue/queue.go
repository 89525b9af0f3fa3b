package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/hpcq/hpcq/pkg/schema"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Header names set on dead letters.
const (
	HeaderReason     = "Hpcq-Reason"
	HeaderDeliveries = "Hpcq-Deliveries"
	HeaderSubject    = "Hpcq-Subject"
	HeaderStreamSeq  = "Hpcq-Stream-Seq"
	HeaderRun        = "Hpcq-Run"
	HeaderNode       = "Hpcq-Node"
	HeaderAttempt    = "Hpcq-Attempt"
	HeaderWorker     = "Hpcq-Worker"
)

// defaultTimeout bounds calls whose context has no deadline.
const defaultTimeout = 10 * time.Second

func withDefaultTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, defaultTimeout)
}

// Queue is the JetStream side of hpcq: streams, publishing, pool consumers,
// dead letters and the worker registry. It is safe for concurrent use.
type Queue struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	opts Options
	log  *slog.Logger
	kv   jetstream.KeyValue
	// handbacks counts the hand-backs of task messages (HandBacksBucket).
	handbacks jetstream.KeyValue
	// owned is set when the Queue opened the connection (Dial).
	owned bool

	artifactsMu sync.Mutex
	artifacts   jetstream.ObjectStore
	storesMu    sync.Mutex // layers, images
	layers      jetstream.ObjectStore
	images      jetstream.ObjectStore
	cancelMu    sync.Mutex
	cancelKV    jetstream.KeyValue
	// batcher groups results ending together (batch.go).
	batcher batcher
}

// Dial connects to the external server c describes and returns a Queue
// that owns the connection: Close closes it.
func Dial(ctx context.Context, c ConnConfig, opts Options, log *slog.Logger) (*Queue, error) {
	nc, err := Connect(ctx, c, log)
	if err != nil {
		return nil, err
	}
	q, err := New(ctx, nc, opts, log)
	if err != nil {
		nc.Close()
		return nil, err
	}
	q.owned = true
	return q, nil
}

// Conn is the queue's NATS connection (the LLM gateway shares it).
func (q *Queue) Conn() *nats.Conn { return q.nc }

// Close flushes what was sent (acks included) and closes the connection
// if the Queue opened it. A Queue made with New leaves the connection to
// its owner.
func (q *Queue) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := q.nc.FlushWithContext(ctx); err != nil && q.nc.IsConnected() {
		q.log.Warn("flush before close failed", "err", err)
	}
	if q.owned {
		q.nc.Close()
	}
}

// New creates or updates the streams and the registry bucket on the server
// behind nc and returns a Queue. The connection stays owned by the caller.
func New(ctx context.Context, nc *nats.Conn, opts Options, log *slog.Logger) (*Queue, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(2*maxAsyncPending))
	if err != nil {
		return nil, fmt.Errorf("queue: jetstream: %w", err)
	}
	// Declaring replicated streams on a cluster takes a while, and a retry
	// per stream or bucket when several processes start at once (each
	// unanswered try costs declareAttempt): the streams, buckets and object
	// store get declareBudget together.
	ctx, cancel := context.WithTimeout(ctx, declareBudget)
	defer cancel()
	kv, hb, err := ensureStreams(ctx, js, opts)
	if err != nil {
		return nil, err
	}
	q := &Queue{nc: nc, js: js, opts: opts, log: log, kv: kv, handbacks: hb}
	q.batcher = batcher{q: q, runs: map[string]*runBatches{}}
	if !opts.UseExisting {
		// What workers open, declared here, so that a worker's user needs no
		// right to create it.
		if _, err := q.Artifacts(ctx); err != nil {
			return nil, err
		}
		if _, err := q.Layers(ctx); err != nil {
			return nil, err
		}
		if _, err := q.Images(ctx); err != nil {
			return nil, err
		}
		if _, err := q.cancels(ctx); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// Flush waits until the server has processed everything sent so far
// (acks included).
func (q *Queue) Flush(ctx context.Context) error {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	return q.nc.FlushWithContext(ctx)
}

// Options returns the options in effect, defaults filled in.
func (q *Queue) Options() Options { return q.opts }

// JetStream exposes the underlying JetStream context for tooling and tests.
func (q *Queue) JetStream() jetstream.JetStream { return q.js }

// PublishTask validates t and publishes it on its pool's subject with
// Nats-Msg-Id set, waiting for the server's acknowledgement. duplicate is
// true when the server already had the task within the dedup window; the
// call is then a no-op.
func (q *Queue) PublishTask(ctx context.Context, t *schema.NodeTask) (duplicate bool, err error) {
	data, err := q.encodeTask(t)
	if err != nil {
		return false, err
	}
	ack, err := patiently(ctx, q.nc, func(ctx context.Context) (*jetstream.PubAck, error) {
		return q.js.PublishMsg(ctx, taskMsg(t, data))
	})
	if err != nil {
		return false, fmt.Errorf("queue: publish task %s: %w", t.MsgID(), err)
	}
	return ack.Duplicate, nil
}

// patience: how long a publish or an ack waits out a stream or consumer
// with no leader (an election on a NATS cluster takes seconds after its
// leader died), asking again every attempt at most. Both are safe to ask
// twice: each message carries its Nats-Msg-Id, so a publish asked twice is
// stored once, and the server confirms an ack of a message already acked.
const (
	patience = time.Minute
	attempt  = 5 * time.Second
)

// Transient reports whether err is one of a stream or consumer that is
// there but has no leader for the moment (an election on a NATS cluster):
// no response, no responders, a deadline. Asking again later may succeed.
func Transient(err error) bool {
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
}

// patiently runs try until it succeeds, retrying the errors of a stream or
// consumer that is there but has no leader for the moment (no response, no
// responders, an attempt's deadline), within patience or ctx. Other errors
// return at once, and so does an attempt nc's user may not make (the
// server reported a permission violation).
func patiently[T any](ctx context.Context, nc *nats.Conn, try func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, patience)
	defer cancel()
	backoff := 250 * time.Millisecond
	for {
		start := time.Now()
		actx, acancel := context.WithTimeout(ctx, attempt)
		v, err := try(actx)
		acancel()
		if err == nil || !Transient(err) || ctx.Err() != nil || refused(nc, start) != nil {
			return v, explain(nc, err, start)
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// msgHeadroom is what a message's subject and headers may add to its
// payload against the server's max_payload.
const msgHeadroom = 1 << 10

// fitsServer refuses a message of n payload bytes that the server would
// refuse (its max_payload): as an invalid message, so that the caller
// reports it rather than asking again. hpcq's embedded server takes every
// task and result; a nats-server takes 1 MB unless configured.
func (q *Queue) fitsServer(what string, n int) error {
	if limit := q.nc.MaxPayload(); limit > 0 && int64(n)+msgHeadroom > limit {
		return fmt.Errorf("queue: %s: %w: %d bytes encoded, and the NATS server takes at most %d (its max_payload: set it to %d or more, e.g. max_payload: 9MB)",
			what, schema.ErrInvalidMessage, n, limit-msgHeadroom, schema.MaxTaskBytes+msgHeadroom)
	}
	return nil
}

// encodeTask validates and encodes t, and checks that the server takes it.
func (q *Queue) encodeTask(t *schema.NodeTask) ([]byte, error) {
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("queue: task %s/%d: %w", t.NodeID, t.Attempt, err)
	}
	data, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("queue: encode task: %w", err)
	}
	if len(data) > schema.MaxTaskBytes {
		return nil, fmt.Errorf("queue: task %s: %w: %d bytes encoded, at most %d", t.MsgID(), schema.ErrInvalidMessage, len(data), schema.MaxTaskBytes)
	}
	return data, q.fitsServer("task "+t.MsgID(), len(data))
}

// taskMsg is the message of task t encoded as data: with its Nats-Msg-Id,
// the stream it must land in, and readsBatchesHeader (this build reads
// batched results).
func taskMsg(t *schema.NodeTask, data []byte) *nats.Msg {
	m := nats.NewMsg(TaskSubject(t.Pool, t.RunID))
	m.Data = data
	m.Header.Set(jetstream.MsgIDHeader, t.MsgID())
	m.Header.Set(jetstream.ExpectedStreamHeader, TasksStream)
	m.Header.Set(readsBatchesHeader, "1")
	return m
}

// PublishOutcome is the fate of one task of PublishTasks.
type PublishOutcome struct {
	Duplicate bool
	Err       error
}

// maxAsyncPending bounds the publishes awaiting an acknowledgement.
const maxAsyncPending = 4096

// PublishTasks publishes many tasks with pipelined (asynchronous) publishes,
// at most maxAsyncPending awaiting their acknowledgement at once, and waits
// for every acknowledgement. The outcomes are in the order of tasks; err is
// the first failure, if any.
func (q *Queue) PublishTasks(ctx context.Context, tasks []*schema.NodeTask) ([]PublishOutcome, error) {
	out := make([]PublishOutcome, len(tasks))
	futures := make([]jetstream.PubAckFuture, len(tasks))
	var first error
	fail := func(i int, err error) {
		out[i].Err = err
		if first == nil {
			first = err
		}
	}
	settle := func(i int) {
		f := futures[i]
		if f == nil {
			return
		}
		select {
		case ack := <-f.Ok():
			out[i].Duplicate = ack.Duplicate
		case err := <-f.Err():
			fail(i, fmt.Errorf("queue: publish task %s: %w", tasks[i].MsgID(), err))
		case <-ctx.Done():
			fail(i, fmt.Errorf("queue: publish task %s: %w", tasks[i].MsgID(), ctx.Err()))
		}
	}
	for i, t := range tasks {
		if i >= maxAsyncPending {
			settle(i - maxAsyncPending)
		}
		data, err := q.encodeTask(t)
		if err != nil {
			fail(i, err)
			continue
		}
		f, err := q.js.PublishMsgAsync(taskMsg(t, data))
		if err != nil {
			fail(i, fmt.Errorf("queue: publish task %s: %w", t.MsgID(), err))
			continue
		}
		futures[i] = f
	}
	for i := max(0, len(tasks)-maxAsyncPending); i < len(tasks); i++ {
		settle(i)
	}
	return out, first
}

// PublishResult validates r and publishes it on its run's subject with
// Nats-Msg-Id set; a second result for the same (run, node, attempt) within
// the dedup window is dropped by the server (duplicate is then true).
func (q *Queue) PublishResult(ctx context.Context, r *schema.NodeResult) (duplicate bool, err error) {
	data, err := encodeResult(r)
	if err != nil {
		return false, err
	}
	return q.publishResult(ctx, r.RunID, r.MsgID(), data)
}

// encodeResult validates and encodes r.
func encodeResult(r *schema.NodeResult) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("queue: result %s: %w", r.MsgID(), err)
	}
	data, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("queue: encode result: %w", err)
	}
	if len(data) > schema.MaxResultBytes {
		return nil, fmt.Errorf("queue: result %s: %w: %d bytes encoded, at most %d (log tails too long?)", r.MsgID(), schema.ErrInvalidMessage, len(data), schema.MaxResultBytes)
	}
	return data, nil
}

// publishResult publishes one encoded result of run with Nats-Msg-Id id.
func (q *Queue) publishResult(ctx context.Context, run, id string, data []byte) (bool, error) {
	if err := q.fitsServer("result "+id, len(data)); err != nil {
		return false, err
	}
	ack, err := patiently(ctx, q.nc, func(ctx context.Context) (*jetstream.PubAck, error) {
		return q.js.Publish(ctx, ResultSubject(run), data, jetstream.WithMsgID(id), jetstream.WithExpectStream(ResultsStream))
	})
	if err != nil {
		return false, fmt.Errorf("queue: publish result %s: %w", id, err)
	}
	return ack.Duplicate, nil
}

// DeadLetter describes a task that was moved to the dead-letter subject.
type DeadLetter struct {
	Pool       string
	Reason     string
	Deliveries uint64
	Subject    string
	StreamSeq  uint64
	RunID      string
	NodeID     string
	Attempt    int
	Worker     string
	Data       []byte
	Time       time.Time
}

// deadLetter copies msg to the pool's dead-letter subject with the reason
// and the delivery count, then terminates it so that it leaves the work
// queue. The copy is deduplicated by stream sequence, so a retry after a
// failed Term does not produce a second dead letter.
func (q *Queue) deadLetter(ctx context.Context, pool string, msg jetstream.Msg, reason, worker string) error {
	meta, err := msg.Metadata()
	if err != nil {
		return fmt.Errorf("queue: dead letter: %w", err)
	}
	m := nats.NewMsg(DLQSubject(pool))
	m.Data = msg.Data()
	m.Header.Set(HeaderReason, reason)
	m.Header.Set(HeaderDeliveries, strconv.FormatUint(meta.NumDelivered, 10))
	m.Header.Set(HeaderSubject, msg.Subject())
	m.Header.Set(HeaderStreamSeq, strconv.FormatUint(meta.Sequence.Stream, 10))
	if worker != "" {
		m.Header.Set(HeaderWorker, worker)
	}
	// Best effort: name the task when the body parses far enough.
	var id struct {
		RunID   string `json:"run_id"`
		NodeID  string `json:"node_id"`
		Attempt int    `json:"attempt"`
	}
	if json.Unmarshal(msg.Data(), &id) == nil {
		if schema.CheckToken("run_id", id.RunID, true) == nil {
			m.Header.Set(HeaderRun, id.RunID)
		}
		if schema.CheckID("node_id", id.NodeID, true) == nil {
			m.Header.Set(HeaderNode, id.NodeID)
			m.Header.Set(HeaderAttempt, strconv.Itoa(id.Attempt))
		}
	}
	m.Header.Set(jetstream.MsgIDHeader, "dlq/"+pool+"/"+strconv.FormatUint(meta.Sequence.Stream, 10))
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	if _, err := q.js.PublishMsg(ctx, m, jetstream.WithExpectStream(DLQStream)); err != nil {
		return fmt.Errorf("queue: publish dead letter for %s seq %d: %w", msg.Subject(), meta.Sequence.Stream, err)
	}
	if err := msg.Term(); err != nil {
		return fmt.Errorf("queue: terminate dead-lettered seq %d: %w", meta.Sequence.Stream, err)
	}
	q.log.Warn("task dead-lettered", "pool", pool, "seq", meta.Sequence.Stream, "deliveries", meta.NumDelivered,
		"run_id", id.RunID, "node_id", id.NodeID, "reason", reason)
	return nil
}

func decodeDeadLetter(m jetstream.Msg) DeadLetter {
	h := m.Headers()
	d := DeadLetter{
		Reason:  h.Get(HeaderReason),
		Subject: h.Get(HeaderSubject),
		RunID:   h.Get(HeaderRun),
		NodeID:  h.Get(HeaderNode),
		Worker:  h.Get(HeaderWorker),
		Data:    m.Data(),
	}
	if len(m.Subject()) > len(dlqPrefix) {
		d.Pool = m.Subject()[len(dlqPrefix):]
	}
	d.Deliveries, _ = strconv.ParseUint(h.Get(HeaderDeliveries), 10, 64)
	d.StreamSeq, _ = strconv.ParseUint(h.Get(HeaderStreamSeq), 10, 64)
	d.Attempt, _ = strconv.Atoi(h.Get(HeaderAttempt))
	if meta, err := m.Metadata(); err == nil {
		d.Time = meta.Timestamp
	}
	return d
}

// DeadLetters returns the dead letters of a pool ("" for every pool), oldest
// first, at most limit of them (0: all).
func (q *Queue) DeadLetters(ctx context.Context, pool string, limit int) ([]DeadLetter, error) {
	filter := dlqPrefix + "*"
	if pool != "" {
		filter = DLQSubject(pool)
	}
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	info, err := q.js.Stream(ctx, DLQStream)
	if err != nil {
		return nil, fmt.Errorf("queue: dead letters: %w", err)
	}
	si, err := info.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, fmt.Errorf("queue: dead letters: %w", err)
	}
	var total uint64
	for _, n := range si.State.Subjects {
		total += n
	}
	if total == 0 {
		return nil, nil
	}
	if limit > 0 && uint64(limit) < total {
		total = uint64(limit)
	}
	cons, err := q.js.OrderedConsumer(ctx, DLQStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		return nil, fmt.Errorf("queue: dead letters: %w", err)
	}
	var out []DeadLetter
	for uint64(len(out)) < total {
		batch, err := cons.Fetch(int(min(total-uint64(len(out)), 1000)), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return out, fmt.Errorf("queue: dead letters: %w", err)
		}
		n := 0
		for m := range batch.Messages() {
			out = append(out, decodeDeadLetter(m))
			n++
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return out, fmt.Errorf("queue: dead letters: %w", err)
		}
		if n == 0 {
			break
		}
	}
	return out, nil
}
