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
  error_kind TEXT NOT NULL, ts_ms INTEGER NOT NULL, ts TEXT NOT NULL, PRIMARY KEY (run, node, attempt, phase));
CREATE TABLE IF NOT EXISTS metrics (
  run TEXT NOT NULL, node TEXT NOT NULL, attempt INTEGER NOT NULL, name TEXT NOT NULL, value REAL NOT NULL,
  unit TEXT NOT NULL, ts_ms INTEGER NOT NULL, ts TEXT NOT NULL, PRIMARY KEY (run, node, attempt, name));
CREATE TABLE IF NOT EXISTS llm_calls (
  run TEXT NOT NULL, node TEXT NOT NULL, call_id TEXT NOT NULL, purpose TEXT NOT NULL, model TEXT NOT NULL,
  tokens_in INTEGER NOT NULL, tokens_out INTEGER NOT NULL, latency_ms REAL NOT NULL, cost_usd REAL NOT NULL,
  cache_hit INTEGER NOT NULL, error TEXT NOT NULL, ts_ms INTEGER NOT NULL, ts TEXT NOT NULL,
  PRIMARY KEY (run, node, call_id));
CREATE TABLE IF NOT EXISTS artifacts (
  run TEXT NOT NULL, node TEXT NOT NULL, attempt INTEGER NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL,
  path TEXT NOT NULL, bytes INTEGER NOT NULL, sha256 TEXT NOT NULL, ts_ms INTEGER NOT NULL, ts TEXT NOT NULL,
  PRIMARY KEY (run, node, attempt, kind, name));
`

// sqliteNodesTable: metric_value is NULL for a node without a value.
const sqliteNodesTable = `CREATE TABLE IF NOT EXISTS nodes (
  run TEXT NOT NULL, node TEXT NOT NULL, parent TEXT NOT NULL, stage INTEGER NOT NULL, kind TEXT NOT NULL,
  pool TEXT NOT NULL, attempt INTEGER NOT NULL, status TEXT NOT NULL, error_kind TEXT NOT NULL,
  metric_name TEXT NOT NULL, metric_value REAL, ts_ms INTEGER NOT NULL, ts TEXT NOT NULL,
  PRIMARY KEY (run, node))`

// SQLite is the sink of a local run: the run's SQLite file.
type SQLite struct {
	db *sql.DB
	mu sync.Mutex
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
	if err := nullableMetric(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("results: schema of %s: %w", path, err)
	}
	return &SQLite{db: db}, nil
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
	defer tx.Rollback()
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

// Write stores rows in one transaction.
func (s *SQLite) Write(ctx context.Context, rows Rows) error {
	if rows.Len() == 0 {
		return nil
	}
	rows = rows.withIDs()
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	defer tx.Rollback()
	vals := rows.values()
	for _, table := range Tables {
		cols := Columns[table]
		stmt := fmt.Sprintf("INSERT OR REPLACE INTO %s (%s) VALUES (%s)", table, strings.Join(cols, ", "),
			strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", "))
		for _, row := range vals[table] {
			args := make([]any, len(row))
			for i, v := range row {
				if t, ok := v.(time.Time); ok {
					v = sqliteTime(t)
				}
				args[i] = v
			}
			if _, err := tx.ExecContext(ctx, stmt, args...); err != nil {
				return fmt.Errorf("results: insert into %s: %w", table, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("results: commit: %w", err)
	}
	return nil
}

// Close closes the file.
func (s *SQLite) Close() error { return s.db.Close() }
