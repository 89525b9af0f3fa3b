package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/hpcq/hpcq/pkg/memory"
)

// Rows of the ClickHouse tables, as the shipper queues them.
type (
	archivalRow struct {
		seq                            int64
		branch, text                   string
		tags                           []string
		context, factHash, episodeHash string
		docLen                         uint32
		tsMS                           int64
	}
	hitRow struct {
		seq    int64
		branch string
		target int64
		tsMS   int64
	}
	recallRow struct {
		ev memory.RecallEvent
	}
)

// chRows are the rows of some writes.
type chRows struct {
	archival []archivalRow
	hits     []hitRow
	recall   []recallRow
	// records is how many spool records these rows complete.
	records int
}

func (r *chRows) add(o chRows) {
	r.archival = append(r.archival, o.archival...)
	r.hits = append(r.hits, o.hits...)
	r.recall = append(r.recall, o.recall...)
	r.records += o.records
}

func (r *chRows) empty() bool { return len(r.archival)+len(r.hits)+len(r.recall) == 0 }

// shipper batches rows into ClickHouse. A failed insert is retried with the
// same rows; ClickHouse may then hold a batch twice, which the tables'
// ReplacingMergeTree engine folds, and OPTIMIZE ... FINAL (run after a
// retried or replayed batch) folds at once.
type shipper struct {
	conn driver.Conn
	run  string
	// done reports records whose rows are in ClickHouse.
	done func(records int)

	mu      sync.Mutex
	queued  chRows
	sending bool
	lastErr error
	// dirty: a batch was sent more than once since the last OPTIMIZE.
	dirty bool
	// sent is closed and replaced after every attempt to send.
	sent chan struct{}
	wake chan struct{}
}

// shipEvery is how long rows may wait in the queue; shipRows sends at once.
// Few large inserts: every insert is a part ClickHouse merges later, and
// merges compete with queries. No read needs them (searches read Redis).
const (
	shipEvery = time.Second
	shipRows  = 50_000
)

func newShipper(conn driver.Conn, run string, done func(int)) *shipper {
	return &shipper{conn: conn, run: run, done: done, sent: make(chan struct{}), wake: make(chan struct{}, 1)}
}

func (s *shipper) enqueue(rows chRows) {
	s.mu.Lock()
	s.queued.add(rows)
	n := len(s.queued.archival) + len(s.queued.hits) + len(s.queued.recall)
	s.mu.Unlock()
	if n >= shipRows {
		s.kick()
	}
}

func (s *shipper) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// loop sends queued rows until stop is closed, then once more.
func (s *shipper) loop(stop <-chan struct{}, stopped chan<- struct{}) {
	defer close(stopped)
	t := time.NewTicker(shipEvery)
	defer t.Stop()
	backoff := 50 * time.Millisecond
	for {
		select {
		case <-stop:
			_ = s.sendOnce(context.Background()) // a last try: what it could not send stays queued
			return
		case <-t.C:
		case <-s.wake:
		}
		if err := s.sendOnce(context.Background()); err != nil {
			select {
			case <-stop:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 2*time.Second)
			s.kick()
			continue
		}
		backoff = 50 * time.Millisecond
	}
}

// sendOnce sends what is queued; on failure the rows go back in front.
func (s *shipper) sendOnce(ctx context.Context) error {
	s.mu.Lock()
	if s.sending || s.queued.empty() && s.queued.records == 0 {
		s.mu.Unlock()
		return nil
	}
	rows := s.queued
	s.queued = chRows{}
	s.sending = true
	s.mu.Unlock()

	err := s.insert(ctx, rows)

	s.mu.Lock()
	s.sending = false
	s.lastErr = err
	if err != nil {
		rows.add(s.queued)
		s.queued = rows
		s.dirty = true
	}
	dirty := s.dirty && err == nil && s.queued.empty()
	if dirty {
		s.dirty = false
	}
	close(s.sent)
	s.sent = make(chan struct{})
	s.mu.Unlock()
	if err == nil {
		s.done(rows.records)
		if dirty {
			s.optimize(ctx)
		}
	}
	return err
}

// insert sends one batch per table.
func (s *shipper) insert(ctx context.Context, r chRows) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if len(r.archival) > 0 {
		b, err := s.conn.PrepareBatch(ctx, `INSERT INTO archival (run, seq, branch, text, tags, context, fact_hash, episode_hash, doc_len, ts_ms, ts)`)
		if err != nil {
			return fmt.Errorf("clickhouse archival: %w", err)
		}
		for _, a := range r.archival {
			if err := b.Append(s.run, a.seq, a.branch, a.text, a.tags, a.context, a.factHash, a.episodeHash, a.docLen, a.tsMS, time.UnixMilli(a.tsMS)); err != nil {
				_ = b.Abort() // the append's error is the one to report
				return fmt.Errorf("clickhouse archival: %w", err)
			}
		}
		if err := b.Send(); err != nil {
			return fmt.Errorf("clickhouse archival: %w", err)
		}
	}
	if len(r.hits) > 0 {
		b, err := s.conn.PrepareBatch(ctx, `INSERT INTO archival_hits (run, seq, branch, target, ts_ms, ts)`)
		if err != nil {
			return fmt.Errorf("clickhouse archival_hits: %w", err)
		}
		for _, h := range r.hits {
			if err := b.Append(s.run, h.seq, h.branch, h.target, h.tsMS, time.UnixMilli(h.tsMS)); err != nil {
				_ = b.Abort() // the append's error is the one to report
				return fmt.Errorf("clickhouse archival_hits: %w", err)
			}
		}
		if err := b.Send(); err != nil {
			return fmt.Errorf("clickhouse archival_hits: %w", err)
		}
	}
	if len(r.recall) > 0 {
		b, err := s.conn.PrepareBatch(ctx, `INSERT INTO recall_events (run, seq, branch, node_id, phase, kind, payload, ts_ms, ts)`)
		if err != nil {
			return fmt.Errorf("clickhouse recall_events: %w", err)
		}
		for _, rr := range r.recall {
			e := rr.ev
			if err := b.Append(s.run, e.Seq, e.Branch, e.NodeID, e.Phase, e.Kind, e.Payload, e.TS.UnixMilli(), e.TS); err != nil {
				_ = b.Abort() // the append's error is the one to report
				return fmt.Errorf("clickhouse recall_events: %w", err)
			}
		}
		if err := b.Send(); err != nil {
			return fmt.Errorf("clickhouse recall_events: %w", err)
		}
	}
	return nil
}

// optimize folds duplicate rows left by retried batches.
func (s *shipper) optimize(ctx context.Context) {
	for _, t := range []string{"archival", "archival_hits", "recall_events"} {
		_ = s.conn.Exec(ctx, "OPTIMIZE TABLE "+t+" FINAL") // best effort: the engine folds them later anyway
	}
}

// flush sends everything queued and waits for it, through a ClickHouse
// outage if it must: failed sends are made again with backoff until ctx
// ends, which returns the last failure.
func (s *shipper) flush(ctx context.Context) error {
	backoff := 50 * time.Millisecond
	for {
		s.mu.Lock()
		busy := s.sending
		empty := s.queued.empty() && s.queued.records == 0
		ch := s.sent
		s.mu.Unlock()
		if empty && !busy {
			return nil
		}
		if !busy {
			err := s.sendOnce(ctx)
			if err == nil {
				backoff = 50 * time.Millisecond
				continue
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("memory/cluster: %w", err)
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
