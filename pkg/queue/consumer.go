package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hpcq/hpcq/pkg/schema"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// PoolConsumer pulls the tasks of one pool through the pool's durable
// consumer, which all workers of the pool share.
type PoolConsumer struct {
	q      *Queue
	pool   string
	worker string
	cons   jetstream.Consumer
}

// PoolConsumer creates or updates the durable consumer of pool and returns
// a handle to pull from it. worker names the caller in dead letters.
func (q *Queue) PoolConsumer(ctx context.Context, pool, worker string) (*PoolConsumer, error) {
	if err := schema.ValidatePool(pool); err != nil {
		return nil, err
	}
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	want := consumerConfig(pool, q.opts)
	existing := func(ctx context.Context) (jetstream.Consumer, error) {
		c, err := q.js.Consumer(ctx, TasksStream, ConsumerName(pool))
		if err != nil {
			return nil, err
		}
		// The timings are the workers' settings: a consumer made with others
		// is updated.
		if got := c.CachedInfo().Config; got.AckWait != want.AckWait || got.MaxDeliver != want.MaxDeliver {
			return nil, errors.New("consumer settings differ")
		}
		return c, nil
	}
	cons, err := use(ctx, q.opts, q.nc, existing, func(ctx context.Context) (jetstream.Consumer, error) {
		return q.js.CreateOrUpdateConsumer(ctx, TasksStream, want)
	})
	if err != nil {
		return nil, fmt.Errorf("queue: consumer of pool %s: %w", pool, err)
	}
	return &PoolConsumer{q: q, pool: pool, worker: worker, cons: cons}, nil
}

// Pool is the pool this consumer pulls from.
func (c *PoolConsumer) Pool() string { return c.pool }

// Delivery is one delivery of a valid task to this worker. Exactly one of
// Ack, Nak, NakWithDelay, HandBack and Term must end it.
type Delivery struct {
	Task *schema.NodeTask
	// NumDelivered counts deliveries of this message, this one included,
	// less those handed back unrun (HandBack).
	NumDelivered uint64
	seq          uint64
	// Received is when the worker got the message.
	Received time.Time
	msg      jetstream.Msg
	c        *PoolConsumer
	// batched: the task's publisher reads batched results (batch.go).
	batched bool
}

// PublishResult publishes the result of this delivery's task, as
// Queue.PublishResult does, together with other results of its run ending
// at the same time when the task's publisher reads batched results.
func (d *Delivery) PublishResult(ctx context.Context, r *schema.NodeResult) (duplicate bool, err error) {
	if d.batched {
		return d.c.q.publishBatched(ctx, r)
	}
	return d.c.q.PublishResult(ctx, r)
}

// InProgress tells the server the task is still being worked on, which
// restarts its AckWait clock.
func (d *Delivery) InProgress() error { return d.msg.InProgress() }

// Ack removes the task from the work queue. Call it only after the task's
// result was published and confirmed. The ack itself is not confirmed (a
// confirmed ack costs a round trip per task, about a third of the
// throughput of short tasks): if it is lost (with the connection, or on a
// NATS cluster during an election of the consumer's leader), the task
// comes back after AckWait, runs again, and its second result is dropped
// as a duplicate. For a task whose rerun costs more than that round trip,
// use AckConfirmed.
func (d *Delivery) Ack() error { return d.msg.Ack() }

// AckConfirmed acks the task and waits for the server to confirm it,
// asking again while the consumer has no leader (an election on a NATS
// cluster takes seconds), within a minute or ctx. It returns an error
// only when the server could not be reached in that time; the task then
// comes back after AckWait and its second result is dropped as a
// duplicate.
func (d *Delivery) AckConfirmed(ctx context.Context) error {
	_, err := patiently(ctx, d.c.q.nc, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, d.msg.DoubleAck(ctx)
	})
	return err
}

// Nak hands the task back for immediate redelivery to any worker.
func (d *Delivery) Nak() error { return d.msg.Nak() }

// NakWithDelay hands the task back for redelivery after delay.
func (d *Delivery) NakWithDelay(delay time.Duration) error { return d.msg.NakWithDelay(delay) }

// HandBack returns the task unrun, for redelivery after delay, without
// using up one of its MaxDeliver deliveries: for a worker that must stop
// (a walltime signal) or cannot fit the task in its remaining walltime. The
// hand-back is counted in HandBacksBucket before the Nak; should the count
// fail, the task is handed back all the same (the delivery then counts).
func (d *Delivery) HandBack(ctx context.Context, delay time.Duration) error {
	if err := d.c.q.countHandBack(ctx, d.c.pool, d.seq); err != nil {
		d.c.q.log.Warn("hand-back not counted: this delivery counts against MaxDeliver", "pool", d.c.pool, "err", err)
	}
	if delay > 0 {
		return d.msg.NakWithDelay(delay)
	}
	return d.msg.Nak()
}

// LastDelivery reports whether this is the last delivery MaxDeliver allows:
// a failure now should dead-letter the task rather than hand it back.
func (d *Delivery) LastDelivery() bool { return d.NumDelivered >= uint64(d.c.q.opts.MaxDeliver) }

// DeadLetter moves the task to the dead-letter subject with the reason and
// removes it from the work queue.
func (d *Delivery) DeadLetter(ctx context.Context, reason string) error {
	return d.c.q.deadLetter(ctx, d.c.pool, d.msg, reason, d.c.worker)
}

// Fetch asks the server for up to n tasks and calls handle for each valid one
// as it arrives, waiting at most maxWait for the batch to fill. Messages
// that do not parse, carry an unknown version, or were delivered more than
// MaxDeliver times never reach handle: they are dead-lettered with the
// reason and removed from the work queue. It returns the number of
// messages received (valid or not).
func (c *PoolConsumer) Fetch(ctx context.Context, n int, maxWait time.Duration, handle func(*Delivery)) (int, error) {
	batch, err := c.cons.Fetch(n, jetstream.FetchMaxWait(maxWait))
	if err != nil {
		return 0, fmt.Errorf("queue: fetch from pool %s: %w", c.pool, err)
	}
	got := 0
	for msg := range batch.Messages() {
		got++
		if d := c.accept(ctx, msg); d != nil {
			handle(d)
		}
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
		return got, fmt.Errorf("queue: fetch from pool %s: %w", c.pool, err)
	}
	return got, nil
}

// accept turns a message into a Delivery, or dead-letters it.
func (c *PoolConsumer) accept(ctx context.Context, msg jetstream.Msg) *Delivery {
	now := time.Now()
	meta, err := msg.Metadata()
	if err != nil {
		c.q.log.Error("message without JetStream metadata, left for redelivery", "pool", c.pool, "err", err)
		return nil
	}
	max := uint64(c.q.opts.MaxDeliver)
	delivered := meta.NumDelivered
	if delivered > 1 {
		if hb, err := c.q.handBacks(ctx, c.pool, meta.Sequence.Stream); err != nil {
			c.q.log.Warn("hand-backs not read: counting every delivery", "pool", c.pool, "err", err)
		} else {
			delivered -= min(hb, delivered-1)
		}
	}
	if delivered > max {
		reason := fmt.Sprintf("max deliveries reached: delivered %d times, MaxDeliver is %d (the workers that took it died, were stopped, or could not run it)", delivered, max)
		if err := c.q.deadLetter(ctx, c.pool, msg, reason, c.worker); err != nil {
			c.q.log.Error("dead letter failed, message will be redelivered", "pool", c.pool, "err", err)
		}
		return nil
	}
	task, err := schema.DecodeTask(msg.Data())
	if err == nil && (task.Pool != c.pool || msg.Subject() != TaskSubject(task.Pool, task.RunID)) {
		err = fmt.Errorf("%w: pool: %q, run_id: %q, but the task arrived on %s", schema.ErrInvalidMessage, task.Pool, task.RunID, msg.Subject())
	}
	if err != nil {
		if derr := c.q.deadLetter(ctx, c.pool, msg, "rejected: "+err.Error(), c.worker); derr != nil {
			c.q.log.Error("dead letter failed, message will be redelivered", "pool", c.pool, "err", derr)
		}
		return nil
	}
	return &Delivery{Task: task, NumDelivered: delivered, Received: now, msg: msg, c: c, seq: meta.Sequence.Stream,
		batched: msg.Headers().Get(readsBatchesHeader) == "1"}
}

func handBackKey(pool string, seq uint64) string { return fmt.Sprintf("%s.%d", pool, seq) }

// handBacks is how many times the task message seq was handed back unrun.
func (q *Queue) handBacks(ctx context.Context, pool string, seq uint64) (uint64, error) {
	e, err := q.handbacks.Get(ctx, handBackKey(pool, seq))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(string(e.Value()), 10, 64)
}

// countHandBack adds one to the hand-backs of seq (compare and swap).
func (q *Queue) countHandBack(ctx context.Context, pool string, seq uint64) error {
	key := handBackKey(pool, seq)
	for range 10 {
		e, err := q.handbacks.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			if _, err := q.handbacks.Create(ctx, key, []byte("1")); err == nil || !errors.Is(err, jetstream.ErrKeyExists) {
				return err
			}
		case err != nil:
			return err
		default:
			n, perr := strconv.ParseUint(string(e.Value()), 10, 64)
			if perr != nil {
				return perr
			}
			if _, err := q.handbacks.Update(ctx, key, []byte(strconv.FormatUint(n+1, 10)), e.Revision()); err == nil {
				return nil
			}
		}
	}
	return fmt.Errorf("queue: hand-back of %s: too many concurrent updates", key)
}
