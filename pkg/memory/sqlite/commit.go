package sqlite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hpcq/hpcq/internal/jsonw"
)

// How a write becomes durable: the rows of one API call (a batch) are
// appended to the journal beside the database file as one record, the
// in-memory mirrors are updated, and the call returns. From then on the
// write survives a crash of the process: the record is in the kernel's
// page cache, which is the guarantee SQLite's WAL gives with
// synchronous=NORMAL (Options.Sync adds an fsync per write for crashes of
// the machine). A committer goroutine moves the journaled batches into
// SQLite, those gathered within commitDelay per transaction (group commit),
// and empties the journal once everything in it is in the database. Open
// replays the journal's batches that the database does not hold yet.

// row is one INSERT: the name of a prepared statement and its arguments
// (strings and integers only).
type row struct {
	stmt string
	args []any
}

// batch is the rows of one API call, committed together. seq is the
// largest seq among them.
type batch struct {
	seq  int64
	rows []row
}

// record is a batch as journaled: {"s": seq, "r": [["core", 12, "b1", ...], ...]}.
type record struct {
	S int64   `json:"s"`
	R [][]any `json:"r"`
}

// encode appends the batch's record to dst: the bytes json.Marshal writes
// for it, written without reflection (every memory call journals one, and
// json.Marshal was a tenth of a write's cost).
func (b batch) encode(dst []byte) ([]byte, error) {
	dst = append(dst, `{"s":`...)
	dst = strconv.AppendInt(dst, b.seq, 10)
	dst = append(dst, `,"r":[`...)
	for i, rw := range b.rows {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		dst = jsonw.AppendString(dst, rw.stmt)
		for j, a := range rw.args {
			dst = append(dst, ',')
			switch v := a.(type) {
			case string:
				dst = jsonw.AppendString(dst, v)
			case int64:
				dst = strconv.AppendInt(dst, v, 10)
			case int:
				dst = strconv.AppendInt(dst, int64(v), 10)
			default:
				return dst, fmt.Errorf("%s: argument %d has type %T", rw.stmt, j+1, a)
			}
		}
		dst = append(dst, ']')
	}
	return append(dst, "]}"...), nil
}

func decodeBatch(p []byte) (batch, error) {
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.UseNumber()
	var r record
	if err := dec.Decode(&r); err != nil {
		return batch{}, err
	}
	b := batch{seq: r.S, rows: make([]row, 0, len(r.R))}
	for _, raw := range r.R {
		if len(raw) == 0 {
			return batch{}, errors.New("empty row")
		}
		name, ok := raw[0].(string)
		if _, known := statements[name]; !ok || !known {
			return batch{}, fmt.Errorf("unknown statement %v", raw[0])
		}
		args := make([]any, len(raw)-1)
		for i, a := range raw[1:] {
			switch v := a.(type) {
			case string:
				args[i] = v
			case json.Number:
				n, err := v.Int64()
				if err != nil {
					return batch{}, fmt.Errorf("%s: argument %d: %w", name, i+1, err)
				}
				args[i] = n
			default:
				return batch{}, fmt.Errorf("%s: argument %d has type %T", name, i+1, a)
			}
		}
		b.rows = append(b.rows, row{stmt: name, args: args})
	}
	return b, nil
}

// row adds an INSERT to the batch of the write in progress (under wmu).
func (s *Store) row(name string, args ...any) {
	s.cur.rows = append(s.cur.rows, row{stmt: name, args: args})
}

// maxPendingRows bounds the rows journaled but not yet in SQLite: past it
// writers wait for the committer.
const maxPendingRows = 200_000

// journalResetBytes: once everything journaled is committed and the
// journal is at least this long, it is emptied.
const journalResetBytes = 4 << 20

// checkpointRows: the WAL is checkpointed after this many committed rows.
const checkpointRows = 20_000

// enqueue hands a journaled batch to the committer.
func (s *Store) enqueue(b batch) {
	s.pmu.Lock()
	s.pending = append(s.pending, b)
	s.pendingRows += len(b.rows)
	s.pmu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// backpressure waits while the committer is far behind, and reports a
// committer that keeps failing.
func (s *Store) backpressure(ctx context.Context) error {
	for {
		s.pmu.Lock()
		n, err, ch := s.pendingRows, s.commitErr, s.committed
		s.pmu.Unlock()
		if err != nil {
			return fmt.Errorf("memory/sqlite: writes to the database are failing (%w); the journal keeps what was acknowledged", err)
		}
		if n < maxPendingRows {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// committer moves pending batches into SQLite until stop is closed and
// nothing is pending.
func (s *Store) committer() {
	defer close(s.stopped)
	backoff := 10 * time.Millisecond
	var sinceCheckpoint int
	for {
		select {
		case <-s.wake:
		case <-s.stop:
		}
		s.gather()
		s.pmu.Lock()
		take := s.pending
		s.pending = nil
		s.pmu.Unlock()
		if len(take) == 0 {
			select {
			case <-s.stop:
				return
			default:
				continue
			}
		}
		err := s.commitBatches(take)
		s.pmu.Lock()
		if err != nil {
			// Put them back in front, in order, and try again.
			s.pending = append(take, s.pending...)
			s.commitErr = err
			s.pmu.Unlock()
			select {
			case <-s.stop:
				return // Close gives up; the journal keeps the batches
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			s.kickSelf()
			continue
		}
		backoff = 10 * time.Millisecond
		s.commits++
		for _, b := range take {
			s.pendingRows -= len(b.rows)
		}
		s.applied = take[len(take)-1].seq
		s.commitErr = nil
		close(s.committed)
		s.committed = make(chan struct{})
		more := len(s.pending) > 0
		s.pmu.Unlock()
		for _, b := range take {
			sinceCheckpoint += len(b.rows)
		}
		if sinceCheckpoint >= checkpointRows {
			sinceCheckpoint = 0
			// Failure only lets the WAL grow until the next one.
			_, _ = s.db.Exec(`PRAGMA wal_checkpoint(PASSIVE)`)
		}
		s.maybeResetJournal()
		if more {
			s.kickSelf()
		}
	}
}

// gather waits, before a commit, for more batches to join it: up to the
// store's commit delay, less once commitRows rows are pending or a Flush
// (or Close) asks. The batches are durable in the journal meanwhile and
// every read is served from memory, so the wait costs no writer anything;
// it makes each SQLite transaction carry a few hundred rows instead of a
// few, and the commits (pages written to the WAL, its locks) were a third
// of the store's CPU time.
func (s *Store) gather() {
	t := time.NewTimer(s.delay)
	defer t.Stop()
	for {
		s.pmu.Lock()
		n := s.pendingRows
		s.pmu.Unlock()
		if n >= commitRows {
			return
		}
		select {
		case <-t.C:
			return
		case <-s.stop:
			return
		case <-s.flushNow:
			return
		case <-s.wake:
		}
	}
}

const (
	// commitDelay is how long the committer gathers batches at most; readers
	// of the file in other processes (the sqlite3 CLI) see a write that much
	// later at most, or at once after Flush.
	commitDelay = 20 * time.Millisecond
	// commitRows: a transaction of this many rows is committed without
	// waiting (far below maxPendingRows, where writers would wait).
	commitRows = 4096
)

func (s *Store) kickSelf() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// maybeResetJournal empties a long journal whose batches are all in the
// database. Appends happen under wmu, so holding it (without waiting for
// it: a writer may be waiting for this goroutine) makes the check exact.
func (s *Store) maybeResetJournal() {
	if s.jr.Size() < journalResetBytes || !s.wmu.TryLock() {
		return
	}
	defer s.wmu.Unlock()
	s.pmu.Lock()
	empty := len(s.pending) == 0
	s.pmu.Unlock()
	if empty {
		_ = s.jr.Reset() // on failure it is longer than needed; replay skips committed batches
	}
}

// commitBatches writes batches in one transaction on the writer
// connection. The statements are INSERT OR IGNORE, so a batch that is in
// the database already (a replay) changes nothing.
func (s *Store) commitBatches(bs []batch) error {
	ctx := context.Background()
	c := s.wconn
	if _, err := c.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	for _, b := range bs {
		for _, r := range b.rows {
			if _, err := s.stmts[r.stmt].ExecContext(ctx, r.args...); err != nil {
				_, _ = c.ExecContext(ctx, "ROLLBACK")
				return fmt.Errorf("insert %s: %w", r.stmt, err)
			}
		}
	}
	if _, err := c.ExecContext(ctx, "COMMIT"); err != nil {
		_, _ = c.ExecContext(ctx, "ROLLBACK")
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Flush waits until every write acknowledged before the call is in the
// SQLite file (readers of the file, such as the sqlite3 CLI, see it).
func (s *Store) Flush(ctx context.Context) error {
	s.wmu.Lock()
	target := s.seq
	s.wmu.Unlock()
	for {
		s.pmu.Lock()
		applied, err, ch := s.applied, s.commitErr, s.committed
		s.pmu.Unlock()
		if applied >= target {
			return nil
		}
		if err != nil {
			return fmt.Errorf("memory/sqlite: flush: %w", err)
		}
		s.kickSelf()
		select {
		case s.flushNow <- struct{}{}:
		default:
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
