package results

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Batch gathers rows added one at a time and writes them to a sink
// together, at most every interval after the first of them: for rows
// whose writer need not wait for them to be stored (an LLM call's row), a
// transaction or a spool append per row costs more than everything else of
// recording it. A crash loses at most the rows of the last interval; Flush
// and Close write what is gathered at once.
//
// When the sink refuses a batch, each Add's rows are written alone, so
// that one bad row fails only its own; rows the sink keeps refusing are
// tried batchTries times (once per interval) and then dropped, which is
// logged.
//
// Rows whose writer must know they are stored before it goes on (a node's
// rows, written before its result.json) go through [Batch.Write], which
// gathers them with the others for at most WriteGather.
type Batch struct {
	sink  Sink
	every time.Duration
	log   *slog.Logger

	// wmu is held for a write from taking the rows to the sink's answer,
	// so that a Flush returns after every row added before it is written.
	wmu sync.Mutex

	mu      sync.Mutex
	queued  []batchEntry
	pending *time.Timer
	due     time.Time // when pending fires
	closed  bool
}

// batchEntry is the rows of one Add or Write and how many writes refused
// them; done, for a Write, gets the outcome.
type batchEntry struct {
	rows    Rows
	refused int
	done    chan error
}

// WriteGather is how long [Batch.Write] waits at most for other rows to
// join its transaction: a node's end waits that much longer, and a run of
// many nodes commits a few times per WriteGather instead of once per node.
const WriteGather = 10 * time.Millisecond

// batchTries is how many writes a row may fail before it is dropped.
const batchTries = 3

// NewBatch writes rows to sink at most every interval.
func NewBatch(sink Sink, every time.Duration, log *slog.Logger) *Batch {
	if log == nil {
		log = slog.Default()
	}
	return &Batch{sink: sink, every: every, log: log}
}

// Add queues rows; they are written within the interval. After Close it
// writes them at once, so that nothing added late is lost.
func (b *Batch) Add(rows Rows) {
	if rows.Len() == 0 {
		return
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		if err := b.sink.Write(context.Background(), rows); err != nil {
			b.log.Warn("results rows not written", "rows", rows.Len(), "err", err)
		}
		return
	}
	b.queued = append(b.queued, batchEntry{rows: rows})
	b.schedule(b.every)
	b.mu.Unlock()
}

// Write writes rows with the others gathered within WriteGather (or the
// interval, if shorter) and returns once they are stored, or refused: the
// sink's error for them (they are not tried again). When ctx ends first it
// returns its error; the rows may still be written.
func (b *Batch) Write(ctx context.Context, rows Rows) error {
	if rows.Len() == 0 {
		return nil
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return b.sink.Write(ctx, rows)
	}
	done := make(chan error, 1)
	b.queued = append(b.queued, batchEntry{rows: rows, done: done})
	b.schedule(min(b.every, WriteGather))
	b.mu.Unlock()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("results: %w", ctx.Err())
	}
}

// schedule makes the queued rows be written within wait: it starts the
// timer, or brings a later one forward. The caller holds mu.
func (b *Batch) schedule(wait time.Duration) {
	if b.closed {
		return
	}
	due := time.Now().Add(wait)
	if b.pending != nil {
		if !b.due.After(due) {
			return
		}
		// A timer that fired already writes anyway; this one then finds
		// less or nothing queued.
		b.pending.Stop()
	}
	b.pending, b.due = time.AfterFunc(wait, func() { _ = b.write(context.Background()) }), due
}

// Flush writes what is queued now and returns once every row added before
// it is written, or refused (the error of the first refusal).
func (b *Batch) Flush(ctx context.Context) error { return b.write(ctx) }

// Close writes what is queued; rows added after it are written at once.
func (b *Batch) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return b.write(context.Background())
}

// write takes the queued rows and writes them in one Write, or each Add's
// alone when that is refused.
func (b *Batch) write(ctx context.Context) error {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	b.mu.Lock()
	if b.pending != nil {
		b.pending.Stop()
		b.pending = nil
	}
	entries := b.queued
	b.queued = nil
	closed := b.closed
	b.mu.Unlock()
	if len(entries) == 0 {
		return nil
	}
	var all Rows
	for _, e := range entries {
		all = all.Append(e.rows)
	}
	first := b.sink.Write(ctx, all)
	if first == nil {
		for _, e := range entries {
			e.answer(nil)
		}
		return nil
	}
	// Refused: each Add's rows alone, so that one bad row fails only its own.
	type refusal struct {
		batchEntry
		err error
	}
	var refused []refusal
	if len(entries) == 1 {
		refused = []refusal{{entries[0], first}}
	} else {
		for _, e := range entries {
			err := b.sink.Write(ctx, e.rows)
			if err != nil {
				refused = append(refused, refusal{e, err})
			} else {
				e.answer(nil)
			}
		}
	}
	var left []batchEntry
	for _, r := range refused {
		if r.done != nil {
			r.answer(r.err) // its writer reports it
			continue
		}
		r.refused++
		if r.refused >= batchTries || closed {
			b.log.Warn("results rows not written", "rows", r.rows.Len(), "writes_refused", r.refused, "err", r.err)
			continue
		}
		left = append(left, r.batchEntry)
	}
	if len(left) > 0 {
		b.log.Warn("results rows not written yet; tried again within the interval", "writes", len(left), "err", refused[0].err)
	}
	b.mu.Lock()
	b.queued = append(left, b.queued...)
	if len(b.queued) > 0 {
		b.schedule(b.every)
	}
	b.mu.Unlock()
	if len(refused) == 0 {
		return nil // every Add written alone
	}
	return refused[0].err
}

// answer tells a Write's caller how its rows fared.
func (e batchEntry) answer(err error) {
	if e.done != nil {
		e.done <- err
	}
}
