package results

import (
	"context"
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
	closed  bool
}

// batchEntry is the rows of one Add and how many writes refused them.
type batchEntry struct {
	rows    Rows
	refused int
}

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
	b.schedule()
	b.mu.Unlock()
}

// schedule starts the interval's timer if none runs; the caller holds mu.
func (b *Batch) schedule() {
	if b.pending == nil && !b.closed {
		b.pending = time.AfterFunc(b.every, func() { _ = b.write(context.Background()) })
	}
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
			if err := b.sink.Write(ctx, e.rows); err != nil {
				refused = append(refused, refusal{e, err})
			}
		}
	}
	var left []batchEntry
	for _, r := range refused {
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
		b.schedule()
	}
	b.mu.Unlock()
	if len(refused) == 0 {
		return nil // every Add written alone
	}
	return refused[0].err
}
