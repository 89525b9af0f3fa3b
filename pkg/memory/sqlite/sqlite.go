// Package sqlite is the embedded backend of pkg/memory: one SQLite file in
// WAL mode (modernc.org/sqlite, pure Go) holds everything; recall and
// archival search run on in-memory inverted indexes of those tables, built
// at Open and kept current with every write, whose cost follows the
// reader's visible set (SQLite's FTS5 ranks over the whole table). Writes
// are acknowledged once journaled and reach SQLite in group commits (see
// commit.go).
//
// Visibility is computed, never copied: a branch's scope is the list of
// (branch, max seq) pairs of its path to the root, fixed at fork time and
// cached, and every query joins its rows against that list.
package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	_ "modernc.org/sqlite" // the driver

	"github.com/hpcq/hpcq/internal/journal"
	"github.com/hpcq/hpcq/pkg/memory"
)

// Options configure a Store.
type Options struct {
	// Now is the clock (TTL expiry, timestamps, recency). Defaults to
	// time.Now; tests inject their own.
	Now func() time.Time
	// Sync fsyncs the journal on every write, so that an acknowledged
	// write survives a crash of the machine, not only of the process.
	Sync bool
	// Run is the run id the archival and recall_events views show.
	Run string
	// HalfLife of a fact's confidence in ranking (memory.Rank); default
	// memory.DefaultHalfLife.
	HalfLife time.Duration
	// ReadOnly opens the store to read it beside its writer (a dashboard):
	// no write lock is taken and nothing is written, the journal included;
	// writes fail with ErrReadOnly. It shows the file as it was at Open
	// (open it again to see later writes) without the writes a crash left
	// in the journal, which the next writable Open applies.
	ReadOnly bool

	// commitDelay replaces commitDelay (tests).
	commitDelay time.Duration
}

// ErrReadOnly: a write to a store opened with Options.ReadOnly.
var ErrReadOnly = errors.New("memory/sqlite: the store is open for reading only")

// Store is a memory.Store in one SQLite file.
type Store struct {
	db       *sql.DB
	now      func() time.Time
	halfLife time.Duration
	// scopes computes and caches each branch's scope.
	scopes *memory.Scopes
	// arch indexes the archival texts for scoped BM25 search and dedup;
	// recall the recall events for recall_search.
	arch      *archIndex
	recall    recallIndex
	core      *coreMirror
	summaries *summaryMirror
	branches  sync.Map // id -> memory.Branch
	// wmu serializes this process's writes; seq is the last seq handed
	// out and cur the batch being built. One process writes a file
	// (enforced by a lock file), so the counter lives in memory and is
	// recovered from the tables and the journal at Open.
	wmu sync.Mutex
	seq int64
	cur batch
	// enc is the buffer a batch's journal record is encoded in (under
	// wmu; kept up to maxKeptRecord).
	enc  []byte
	jr   *journal.Journal
	lock *os.File
	// wconn is the committer's connection, with the statements prepared
	// on it: no pool, no per-transaction re-binding.
	wconn *sql.Conn
	stmts map[string]*sql.Stmt
	// pmu guards the committer's queue: pending batches, their row count,
	// the last seq in SQLite, the committer's last error, the transactions
	// committed, and committed, closed (and replaced) after every commit.
	pmu         sync.Mutex
	pending     []batch
	pendingRows int
	applied     int64
	commitErr   error
	commits     int
	committed   chan struct{}
	// wake tells the committer a batch is pending; flushNow that it should
	// commit without gathering more (Flush, Close); delay is how long it
	// gathers at most.
	wake     chan struct{}
	flushNow chan struct{}
	delay    time.Duration
	stop     chan struct{}
	stopped  chan struct{}
	started  bool
	readOnly bool // Options.ReadOnly
}

// Statements prepared once: parsing SQL costs more than running it.
// OR IGNORE: replaying a journaled batch that is in the file already
// changes nothing (the API itself never writes a key twice).
var statements = map[string]string{
	"branch":   `INSERT OR IGNORE INTO mem_branches (id, parent, fork_seq, depth, created_ms) VALUES (?, ?, ?, ?, ?)`,
	"core":     `INSERT OR IGNORE INTO mem_core (seq, branch, key, value, importance, expires_ms, deleted, ts_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
	"recall":   `INSERT OR IGNORE INTO mem_recall (seq, branch, ts_ms, kind, node_id, phase, payload) VALUES (?, ?, ?, ?, ?, ?, ?)`,
	"summary":  `INSERT OR IGNORE INTO mem_recall_summary (seq, branch, text, folded_seq, ts_ms) VALUES (?, ?, ?, ?, ?)`,
	"archival": `INSERT OR IGNORE INTO mem_archival (seq, branch, text, tags, context, fact_hash, episode_hash, doc_len, ts_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
	"hit":      `INSERT OR IGNORE INTO mem_archival_hits (seq, branch, target, ts_ms) VALUES (?, ?, ?, ?)`,
}

// ErrLocked: another process has the store open for writing.
var ErrLocked = errors.New("memory/sqlite: the store is open for writing by another process")

// lastSeq is the largest seq any table holds.
const lastSeq = `SELECT MAX(m) FROM (
  SELECT MAX(fork_seq) AS m FROM mem_branches UNION ALL SELECT MAX(seq) FROM mem_core UNION ALL SELECT MAX(seq) FROM mem_recall
  UNION ALL SELECT MAX(seq) FROM mem_recall_summary UNION ALL SELECT MAX(seq) FROM mem_archival UNION ALL SELECT MAX(seq) FROM mem_archival_hits)`

var _ memory.Store = (*Store)(nil)

// scopeEntry is the visibility rule's unit, shared by the stores.
type scopeEntry = memory.ScopeEntry

// schema: every table is appended to in seq order and read back whole at
// Open (reads run on the in-memory mirrors), so no secondary index is kept:
// each commit then writes a single page per table it touches.
const schema = `
CREATE TABLE IF NOT EXISTS mem_branches (
  id TEXT PRIMARY KEY, parent TEXT NOT NULL, fork_seq INTEGER NOT NULL, depth INTEGER NOT NULL, created_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS mem_core (
  seq INTEGER PRIMARY KEY, branch TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
  importance INTEGER NOT NULL, expires_ms INTEGER NOT NULL, deleted INTEGER NOT NULL, ts_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS mem_recall (
  seq INTEGER PRIMARY KEY, branch TEXT NOT NULL, ts_ms INTEGER NOT NULL, kind TEXT NOT NULL,
  node_id TEXT NOT NULL, phase TEXT NOT NULL, payload TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS mem_recall_summary (
  seq INTEGER PRIMARY KEY, branch TEXT NOT NULL, text TEXT NOT NULL, folded_seq INTEGER NOT NULL, ts_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS mem_archival (
  seq INTEGER PRIMARY KEY, branch TEXT NOT NULL, text TEXT NOT NULL, tags TEXT NOT NULL, context TEXT NOT NULL,
  fact_hash TEXT NOT NULL, episode_hash TEXT NOT NULL, doc_len INTEGER NOT NULL, ts_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS mem_archival_hits (
  seq INTEGER PRIMARY KEY, branch TEXT NOT NULL, target INTEGER NOT NULL, ts_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS mem_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

-- The results views: the columns of ClickHouse's archival and
-- recall_events tables (internal/chdb/migrations), so that one query works on
-- a local run's file and on a cluster's ClickHouse. tags is JSON text here.
CREATE VIEW IF NOT EXISTS archival AS
  SELECT (SELECT value FROM mem_meta WHERE key = 'run') AS run, seq, branch, text, tags, context, fact_hash,
    episode_hash, doc_len, ts_ms, strftime('%Y-%m-%d %H:%M:%S', ts_ms / 1000, 'unixepoch') AS ts
  FROM mem_archival;
CREATE VIEW IF NOT EXISTS recall_events AS
  SELECT (SELECT value FROM mem_meta WHERE key = 'run') AS run, seq, branch, node_id, phase, kind, payload,
    ts_ms, strftime('%Y-%m-%d %H:%M:%S', ts_ms / 1000, 'unixepoch') AS ts
  FROM mem_recall;
`

// Open opens (creating if needed) the store in the file at path.
//
// Long: the store's start in order (file, pragmas, schema, journal replay,
// mirrors), each undone by the steps after it when it fails.
func Open(path string, o Options) (*Store, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	q := url.Values{}
	// wal_autocheckpoint(0): a checkpoint inside a write would add
	// milliseconds to that write; a background goroutine checkpoints.
	for _, p := range []string{"journal_mode(WAL)", "busy_timeout(10000)", "synchronous(NORMAL)", "foreign_keys(OFF)", "wal_autocheckpoint(0)"} {
		q.Add("_pragma", p)
	}
	if o.ReadOnly {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("memory/sqlite: open %s: %w", path, err)
		}
		q.Add("_pragma", "query_only(1)")
	}
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("memory/sqlite: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(4)
	if o.ReadOnly {
		return openReadOnly(db, o)
	}
	lock, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("memory/sqlite: lock file: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		db.Close()
		return nil, fmt.Errorf("%w: %s", ErrLocked, path)
	}
	s := newStore(db, o)
	s.lock, s.stmts = lock, map[string]*sql.Stmt{}
	s.wake, s.flushNow, s.stop, s.stopped = make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	s.delay = cmp.Or(o.commitDelay, commitDelay)
	fail := func(err error) (*Store, error) {
		s.Close()
		return nil, err
	}
	if _, err := db.Exec(schema); err != nil {
		return fail(fmt.Errorf("memory/sqlite: schema: %w", err))
	}
	if o.Run != "" {
		if _, err := db.Exec(`INSERT OR REPLACE INTO mem_meta (key, value) VALUES ('run', ?)`, o.Run); err != nil {
			return fail(fmt.Errorf("memory/sqlite: run id: %w", err))
		}
	}
	if s.wconn, err = db.Conn(context.Background()); err != nil {
		return fail(fmt.Errorf("memory/sqlite: writer connection: %w", err))
	}
	for name, q := range statements {
		st, err := s.wconn.PrepareContext(context.Background(), q)
		if err != nil {
			return fail(fmt.Errorf("memory/sqlite: prepare %s: %w", name, err))
		}
		s.stmts[name] = st
	}
	var last sql.NullInt64
	if err := db.QueryRow(lastSeq).Scan(&last); err != nil {
		return fail(fmt.Errorf("memory/sqlite: last seq: %w", err))
	}
	// Replay what was acknowledged but had not reached the file.
	var replay []batch
	s.jr, err = journal.Open(path+".journal", journal.Options{Sync: o.Sync}, func(p []byte) error {
		b, err := decodeBatch(p)
		if err != nil {
			return fmt.Errorf("batch %d: %w", len(replay)+1, err)
		}
		if b.seq > last.Int64 {
			replay = append(replay, b)
		}
		return nil
	})
	if err != nil {
		return fail(fmt.Errorf("memory/sqlite: %w", err))
	}
	if len(replay) > 0 {
		if err := s.commitBatches(replay); err != nil {
			return fail(fmt.Errorf("memory/sqlite: replay the journal: %w", err))
		}
		last.Int64 = replay[len(replay)-1].seq
	}
	if err := s.jr.Reset(); err != nil {
		return fail(err)
	}
	s.seq, s.applied = last.Int64, last.Int64
	if err := s.loadIndex(); err != nil {
		return fail(err)
	}
	s.started = true
	go s.committer()
	return s, nil
}

// newStore is a store on db with empty mirrors and indexes.
func newStore(db *sql.DB, o Options) *Store {
	s := &Store{db: db, now: o.Now, halfLife: o.HalfLife, arch: newArchIndex(), recall: newRecallIndex(),
		core: newCoreMirror(), summaries: newSummaryMirror(), committed: make(chan struct{})}
	s.scopes = &memory.Scopes{Self: math.MaxInt64, Lookup: s.BranchGet}
	return s
}

// openReadOnly is Open of a store for reading only: its mirrors and
// indexes from the file, no lock, no journal, no committer.
func openReadOnly(db *sql.DB, o Options) (*Store, error) {
	s := newStore(db, o)
	s.readOnly = true
	var last sql.NullInt64
	if err := db.QueryRow(lastSeq).Scan(&last); err != nil {
		db.Close()
		return nil, fmt.Errorf("memory/sqlite: last seq: %w", err)
	}
	s.seq, s.applied = last.Int64, last.Int64
	if err := s.loadIndex(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// loadIndex rebuilds the in-memory mirrors and indexes from the tables.
//
// Long: one query per table, each filling its mirror, in the order the
// mirrors depend on each other.
func (s *Store) loadIndex() error {
	brows, err := s.db.Query(`SELECT id, parent, fork_seq, depth, created_ms FROM mem_branches`)
	if err != nil {
		return fmt.Errorf("memory/sqlite: load branches: %w", err)
	}
	for brows.Next() {
		var b memory.Branch
		var created int64
		if err := brows.Scan(&b.ID, &b.Parent, &b.ForkSeq, &b.Depth, &created); err != nil {
			brows.Close()
			return err
		}
		b.Created = fromMS(created)
		s.branches.Store(b.ID, b)
	}
	brows.Close()
	if err := brows.Err(); err != nil {
		return err
	}
	rows, err := s.db.Query(`SELECT seq, branch, text, tags, context, fact_hash, episode_hash, ts_ms FROM mem_archival ORDER BY seq`)
	if err != nil {
		return fmt.Errorf("memory/sqlite: load archival index: %w", err)
	}
	for rows.Next() {
		var it memory.ArchivalItem
		var tags string
		var ts int64
		if err := rows.Scan(&it.Seq, &it.Branch, &it.Text, &tags, &it.Context, &it.FactHash, &it.EpisodeHash, &ts); err != nil {
			rows.Close()
			return err
		}
		_ = json.Unmarshal([]byte(tags), &it.Tags)
		it.FirstSeen = fromMS(ts)
		s.arch.addItem(it)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	evs, err := s.db.Query(`SELECT seq, branch, ts_ms, kind, node_id, phase, payload FROM mem_recall ORDER BY seq`)
	if err != nil {
		return fmt.Errorf("memory/sqlite: load recall index: %w", err)
	}
	events, err := scanEvents(evs)
	if err != nil {
		return err
	}
	for _, ev := range events {
		s.recall.addEvent(ev)
	}
	crows, err := s.db.Query(`SELECT seq, branch, key, value, importance, expires_ms, deleted, ts_ms FROM mem_core ORDER BY seq`)
	if err != nil {
		return fmt.Errorf("memory/sqlite: load core: %w", err)
	}
	for crows.Next() {
		var v coreVersion
		var expires, ts int64
		if err := crows.Scan(&v.entry.Seq, &v.entry.Branch, &v.entry.Key, &v.entry.Value, &v.entry.Importance, &expires, &v.deleted, &ts); err != nil {
			crows.Close()
			return err
		}
		v.entry.Expires, v.entry.Updated = fromMS(expires), fromMS(ts)
		s.core.add(v)
	}
	crows.Close()
	if err := crows.Err(); err != nil {
		return err
	}
	srows, err := s.db.Query(`SELECT seq, branch, text, folded_seq FROM mem_recall_summary ORDER BY seq`)
	if err != nil {
		return fmt.Errorf("memory/sqlite: load summaries: %w", err)
	}
	for srows.Next() {
		var v summaryVersion
		var branch string
		if err := srows.Scan(&v.seq, &branch, &v.sum.Text, &v.sum.FoldedSeq); err != nil {
			srows.Close()
			return err
		}
		s.summaries.add(branch, v)
	}
	srows.Close()
	if err := srows.Err(); err != nil {
		return err
	}
	hits, err := s.db.Query(`SELECT target, seq, branch, ts_ms FROM mem_archival_hits ORDER BY seq`)
	if err != nil {
		return fmt.Errorf("memory/sqlite: load archival hits: %w", err)
	}
	defer hits.Close()
	for hits.Next() {
		var target, seq, ts int64
		var branch string
		if err := hits.Scan(&target, &seq, &branch, &ts); err != nil {
			return err
		}
		s.arch.addHit(target, seq, branch, fromMS(ts))
	}
	return hits.Err()
}

// Checkpoint flushes every acknowledged write into the database file and
// truncates the WAL, so that the file's size is the store's size.
func (s *Store) Checkpoint(ctx context.Context) error {
	if s.readOnly {
		return ErrReadOnly
	}
	if err := s.Flush(ctx); err != nil {
		return err
	}
	_, err := s.db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
	return err
}

// Close commits what is pending, empties the journal, closes the database
// and releases the write lock. If the pending writes cannot be committed,
// they stay in the journal for the next Open and the error is returned.
func (s *Store) Close() error {
	var errs []error
	if s.started {
		if err := s.Flush(context.Background()); err != nil {
			errs = append(errs, err)
		}
		close(s.stop) // the committer makes one more attempt at what is left
		<-s.stopped
		s.started = false
	}
	if s.jr != nil {
		s.pmu.Lock()
		clean := len(s.pending) == 0
		s.pmu.Unlock()
		if clean {
			if err := s.jr.Reset(); err != nil {
				errs = append(errs, err)
			}
		}
		errs = append(errs, s.jr.Close())
		s.jr = nil
	}
	for _, st := range s.stmts {
		st.Close()
	}
	s.stmts = nil
	if s.wconn != nil {
		s.wconn.Close()
		s.wconn = nil
	}
	errs = append(errs, s.db.Close())
	if s.lock != nil {
		s.lock.Close() // releases the flock
	}
	return errors.Join(errs...)
}

// maxKeptRecord bounds the encoding buffer a Store keeps between writes.
const maxKeptRecord = 64 << 10

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", memory.ErrInvalid, fmt.Sprintf(format, args...))
}

// tx runs fn, which adds rows, as one write with the next seq.
func (s *Store) tx(ctx context.Context, fn func(seq int64) error, onCommit ...func()) error {
	return s.txMulti(ctx, func(next func() int64) error { return fn(next()) }, onCommit...)
}

// txMulti runs fn, which adds rows (s.row) and takes seqs from next, as
// one write: its rows are journaled as one batch, so either all of them
// are durable or none is. onCommit, if set, runs once the batch is
// durable, while writes are still serialized (the mirrors and the
// archival index are updated there, so a concurrent writer's dedup never
// misses an acknowledged fact).
func (s *Store) txMulti(ctx context.Context, fn func(next func() int64) error, onCommit ...func()) error {
	if s.readOnly {
		return ErrReadOnly
	}
	if err := s.backpressure(ctx); err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	seq := s.seq
	s.cur = batch{}
	defer func() { s.cur = batch{} }()
	if err := fn(func() int64 { seq++; return seq }); err != nil {
		return err
	}
	if len(s.cur.rows) == 0 {
		return nil
	}
	s.cur.seq = seq
	rec, err := s.cur.encode(s.enc[:0])
	if cap(rec) <= maxKeptRecord {
		s.enc = rec
	}
	if err != nil {
		return fmt.Errorf("memory/sqlite: encode write: %w", err)
	}
	if err := s.jr.Append(rec); err != nil {
		return fmt.Errorf("memory/sqlite: %w", err)
	}
	s.seq = seq
	s.enqueue(s.cur)
	for _, f := range onCommit {
		f()
	}
	return nil
}
