package results

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the driver
)

// sqliteSchema has the columns of Columns; the primary keys are the
// ClickHouse tables' sorting keys, so that a row written again replaces the
// earlier one there as ReplacingMergeTree does in ClickHouse. ts is UTC
// text, "YYYY-MM-DD HH:MM:SS", as ClickHouse prints a DateTime.
const sqliteSchema = `
CREATE TABLE IF NOT EXISTS runs (
  run TEXT NOT NULL, status TEXT NOT NULL, title TEXT NOT NULL, mode TEXT NOT NULL, config TEXT NOT NULL,
  ts_ms INTEGER NOT NULL, ts TEXT NOT NULL, PRIMARY KEY (run));
` + sqliteNodesTable + `;
CREATE TABLE IF NOT EXISTS phase_runs (
  run TEXT NOT NULL, node TEXT NOT NULL, attempt INTEGER NOT NULL, worker TEXT NOT NULL, phase TEXT NOT NULL,
  status TEXT NOT NULL, exit_code INTEGER NOT NULL, duration_ms REAL NOT NULL, compiler TEXT NOT NULL,
  error_kind TEXT NOT NULL, ts_ms INTEGER NOT NULL, ts TEXT NOT NULL, nodes INTEGER NOT NULL DEFAULT 1, ranks INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (run, node, attempt, phase)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS metrics (
  run TEXT NOT NULL, node TEXT NOT NULL, attempt INTEGER NOT NULL, name TEXT NOT NULL, value REAL NOT NULL,
  unit TEXT NOT NULL, ts_ms INTEGER NOT NULL, ts TEXT NOT NULL, PRIMARY KEY (run, node, attempt, name)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS llm_calls (
  run TEXT NOT NULL, node TEXT NOT NULL, call_id TEXT NOT NULL, purpose TEXT NOT NULL, model TEXT NOT NULL,
  tokens_in INTEGER NOT NULL, tokens_out INTEGER NOT NULL, latency_ms REAL NOT NULL, cost_usd REAL NOT NULL,
  cache_hit INTEGER NOT NULL, error TEXT NOT NULL, ts_ms INTEGER NOT NULL, ts TEXT NOT NULL,
  reasoning_tokens INTEGER NOT NULL DEFAULT 0, cached_tokens INTEGER NOT NULL DEFAULT 0, tokens_estimated INTEGER NOT NULL DEFAULT 0,
  finish_reason TEXT NOT NULL DEFAULT '', unpriced INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (run, node, call_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS artifacts (
  run TEXT NOT NULL, node TEXT NOT NULL, attempt INTEGER NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL,
  path TEXT NOT NULL, bytes INTEGER NOT NULL, sha256 TEXT NOT NULL, ts_ms INTEGER NOT NULL, ts TEXT NOT NULL,
  PRIMARY KEY (run, node, attempt, kind, name)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS samples (
  run TEXT NOT NULL, node TEXT NOT NULL, attempt INTEGER NOT NULL, stage TEXT NOT NULL, input TEXT NOT NULL, repeat INTEGER NOT NULL,
  value REAL, unit TEXT NOT NULL, correct INTEGER NOT NULL, worker TEXT NOT NULL, host TEXT NOT NULL, ts_ms INTEGER NOT NULL, ts TEXT NOT NULL,
  PRIMARY KEY (run, node, attempt, stage, input, repeat)) WITHOUT ROWID;
`

// sqliteNodesTable: metric_value is NULL for a node without a value.
const sqliteNodesTable = `CREATE TABLE IF NOT EXISTS nodes (
  run TEXT NOT NULL, node TEXT NOT NULL, parent TEXT NOT NULL, stage INTEGER NOT NULL, kind TEXT NOT NULL,
  pool TEXT NOT NULL, attempt INTEGER NOT NULL, status TEXT NOT NULL, error_kind TEXT NOT NULL,
  metric_name TEXT NOT NULL, metric_value REAL, ts_ms INTEGER NOT NULL, ts TEXT NOT NULL,
  metric_from TEXT NOT NULL DEFAULT '', self_reported REAL, held_out TEXT NOT NULL DEFAULT '', held_out_metric REAL,
  metric_q1 REAL, metric_q3 REAL, metric_low REAL, metric_high REAL, metric_bound REAL,
  PRIMARY KEY (run, node)) WITHOUT ROWID`

// SQLite is the sink of a local run: the run's SQLite file.
type SQLite struct {
	db *sql.DB
	// inserts are the tables' INSERT statements of 1, 2, 4 ...
	// maxRowsPerInsert rows, each prepared when first needed (imu); a
	// transaction uses each on its connection (prepared there once too).
	imu     sync.Mutex
	inserts map[insertKey]*sql.Stmt
	// mu guards queued and committing: concurrent Writes are committed
	// together (group commit) by the first of them.
	mu         sync.Mutex
	queued     []*sqliteWrite
	committing bool
}

// insertKey names an INSERT: its table and its rows.
type insertKey struct {
	table string
	rows  int
}

// sqliteWrite is one Write waiting for its commit.
type sqliteWrite struct {
	rows Rows
	done chan error
}

// OpenSQLite opens (creating if needed) the results tables in the file.
func OpenSQLite(path string) (*SQLite, error) {
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "busy_timeout(10000)", "synchronous(NORMAL)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("results: open %s: %w", path, err)
	}
	if _, err := db.Exec(sqliteSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("results: schema of %s: %w", path, err)
	}
	if err := addedColumns(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("results: schema of %s: %w", path, err)
	}
	if err := nullableMetric(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("results: schema of %s: %w", path, err)
	}
	s := &SQLite{db: db, inserts: map[insertKey]*sql.Stmt{}}
	for _, table := range Tables {
		if _, err := s.insertOf(table, 1); err != nil {
			s.Close()
			return nil, fmt.Errorf("%w (%s)", err, path)
		}
	}
	return s, nil
}

// addedColumns adds the columns added since the first schema to a file
// written before them (a run resumed from one): llm_calls'
// reasoning_tokens, cached_tokens and tokens_estimated (its rows have 0),
// phase_runs' nodes (1) and ranks (0), the evaluator's and the held-out
// gate's columns of nodes (docs/evaluation.md), llm_calls' finish_reason
// and unpriced.
func addedColumns(db *sql.DB) error {
	const integer, text, real = " INTEGER NOT NULL DEFAULT ", " TEXT NOT NULL DEFAULT ", " REAL"
	for _, c := range []struct{ table, col, def string }{{"llm_calls", "reasoning_tokens", integer + "0"}, {"llm_calls", "cached_tokens", integer + "0"},
		{"llm_calls", "tokens_estimated", integer + "0"}, {"phase_runs", "nodes", integer + "1"}, {"phase_runs", "ranks", integer + "0"},
		{"nodes", "metric_from", text + "''"}, {"nodes", "self_reported", real}, {"nodes", "held_out", text + "''"}, {"nodes", "held_out_metric", real},
		{"nodes", "metric_q1", real}, {"nodes", "metric_q3", real}, {"nodes", "metric_low", real}, {"nodes", "metric_high", real},
		{"nodes", "metric_bound", real}, {"llm_calls", "finish_reason", text + "''"}, {"llm_calls", "unpriced", integer + "0"}} {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM pragma_table_info('`+c.table+`') WHERE name = ?`, c.col).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			if _, err := db.Exec(`ALTER TABLE ` + c.table + ` ADD COLUMN ` + c.col + c.def); err != nil {
				return fmt.Errorf("%s.%s: %w", c.table, c.col, err)
			}
		}
	}
	return nil
}

// nullableMetric lets nodes.metric_value of a file written before it could
// be NULL take NULL (a run resumed from such a file): SQLite cannot drop a
// NOT NULL constraint, so the table is copied into a new one. Rows written
// before keep their values.
func nullableMetric(db *sql.DB) error {
	var notNull int
	err := db.QueryRow(`SELECT "notnull" FROM pragma_table_info('nodes') WHERE name = 'metric_value'`).Scan(&notNull)
	if err != nil || notNull == 0 {
		return err
	}
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }() // after Commit: sql.ErrTxDone, nothing to undo
	for _, stmt := range []string{
		`ALTER TABLE nodes RENAME TO nodes_notnull`,
		sqliteNodesTable,
		`INSERT INTO nodes SELECT * FROM nodes_notnull`,
		`DROP TABLE nodes_notnull`,
	} {
		if _, err := tx.Exec(stmt); err != nil {
			return fmt.Errorf("nodes.metric_value to nullable: %w", err)
		}
	}
	return tx.Commit()
}

// sqliteTime is how ts is stored: as ClickHouse prints a DateTime (UTC).
func sqliteTime(t time.Time) string { return t.UTC().Format(time.DateTime) }

// Write stores rows in one transaction and returns once it is committed.
// Writes made at the same time share a transaction (group commit: a
// commit per write cost most of the time of writing an LLM call's row); if
// that transaction fails, each of its writes is made again alone, so one
// write's bad rows fail only that write.
func (s *SQLite) Write(ctx context.Context, rows Rows) error {
	if rows.Len() == 0 {
		return nil
	}
	w := &sqliteWrite{rows: rows.withIDs(), done: make(chan error, 1)}
	s.mu.Lock()
	s.queued = append(s.queued, w)
	if !s.committing {
		s.committing = true
		for len(s.queued) > 0 {
			batch := s.queued
			s.queued = nil
			s.mu.Unlock()
			s.commit(batch)
			s.mu.Lock()
		}
		s.committing = false
	}
	s.mu.Unlock()
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		// The rows may still be committed: the batch goes on without it.
		return fmt.Errorf("results: %w", ctx.Err())
	}
}

// commit writes a batch of Writes in one transaction, or each alone when
// that fails, and answers each.
func (s *SQLite) commit(batch []*sqliteWrite) {
	err := s.insert(batch)
	if err == nil || len(batch) == 1 {
		for _, w := range batch {
			w.done <- err
		}
		return
	}
	for _, w := range batch {
		w.done <- s.insert([]*sqliteWrite{w})
	}
}

// insert writes the rows of writes in one transaction: each table's rows
// of all the writes, in their order, through INSERTs of up to
// maxRowsPerInsert rows each (a statement per row cost more than the
// commit of a node's rows).
func (s *SQLite) insert(writes []*sqliteWrite) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // after Commit: sql.ErrTxDone, nothing to undo
	vals := make([]map[string][][]any, len(writes))
	for i, w := range writes {
		vals[i] = w.rows.values()
	}
	var rows [][]any
	stmts := map[insertKey]*sql.Stmt{} // on the transaction's connection
	for _, table := range Tables {
		rows = rows[:0]
		for _, v := range vals {
			rows = append(rows, v[table]...)
		}
		for len(rows) > 0 {
			n := chunk(len(rows))
			stmt := stmts[insertKey{table, n}]
			if stmt == nil {
				prepared, err := s.insertOf(table, n)
				if err != nil {
					return err
				}
				stmt = tx.StmtContext(ctx, prepared)
				stmts[insertKey{table, n}] = stmt
			}
			args := make([]any, 0, n*len(Columns[table]))
			for _, row := range rows[:n] {
				for _, v := range row {
					if t, ok := v.(time.Time); ok {
						v = sqliteTime(t)
					}
					args = append(args, v)
				}
			}
			if _, err := stmt.ExecContext(ctx, args...); err != nil {
				return fmt.Errorf("results: insert into %s: %w", table, err)
			}
			rows = rows[n:]
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("results: commit: %w", err)
	}
	return nil
}

// maxRowsPerInsert bounds the rows of one INSERT (the widest table's
// 13 columns make 832 parameters, far below SQLite's limit of 32,766).
const maxRowsPerInsert = 64

// chunk is how many of n rows the next INSERT takes: a power of two, so
// that a few prepared statements per table serve every batch.
func chunk(n int) int {
	c := maxRowsPerInsert
	for c > n {
		c /= 2
	}
	return c
}

// insertOf gives table's INSERT of n rows, prepared once.
func (s *SQLite) insertOf(table string, n int) (*sql.Stmt, error) {
	s.imu.Lock()
	defer s.imu.Unlock()
	k := insertKey{table, n}
	if stmt := s.inserts[k]; stmt != nil {
		return stmt, nil
	}
	cols := Columns[table]
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + ")"
	stmt, err := s.db.Prepare(fmt.Sprintf("INSERT OR REPLACE INTO %s (%s) VALUES %s", table, strings.Join(cols, ", "),
		strings.TrimSuffix(strings.Repeat(one+", ", n), ", ")))
	if err != nil {
		return nil, fmt.Errorf("results: insert into %s: %w", table, err)
	}
	s.inserts[k] = stmt
	return stmt, nil
}

// Close closes the file.
func (s *SQLite) Close() error {
	for _, stmt := range s.inserts {
		stmt.Close()
	}
	return s.db.Close()
}
