package results

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/chdb"
	"github.com/hpcq/hpcq/internal/testutil"
)

// hostileRows is a run with one node, one metric and one phase run.
func hostileRows() Rows {
	ts := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	return Rows{
		Runs:      []Run{{Run: "r1", Status: "done", Title: "t", Mode: "local", Config: "{}", TS: ts}},
		Nodes:     []Node{{Run: "r1", Node: "n1", Stage: 1, Kind: "draft", Status: "ok", MetricName: "gflops", MetricValue: ptr(2.0), TS: ts}},
		PhaseRuns: []PhaseRun{{Run: "r1", Node: "n1", Attempt: 1, Phase: "run", Status: "ok", TS: ts}},
		Metrics:   []Metric{{Run: "r1", Node: "n1", Attempt: 1, Name: "gflops", Value: 2, TS: ts}},
	}
}

// TestSQLiteReadOnly runs the statements that once changed or created
// files through the SQLite runner without the statement check: the
// connection itself refuses each, the data is intact and no file appears.
// Then through QuerySQLite, which refuses them before they reach SQLite.
func TestSQLiteReadOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "hpcq.sqlite")
	s, err := OpenSQLite(path)
	require.NoError(t, err)
	require.NoError(t, s.Write(ctx, hostileRows()))
	require.NoError(t, s.Close())
	outside := t.TempDir()

	count := func(table string) int64 {
		t.Helper()
		tab, err := QuerySQLite(ctx, path, "SELECT count(*) FROM "+table)
		require.NoError(t, err)
		return tab.Rows[0][0].(int64)
	}
	hostile := []string{
		"DROP TABLE metrics",
		"DELETE FROM nodes",
		"INSERT INTO nodes (run, node) VALUES ('x', 'y')",
		"WITH x AS (SELECT 1) DELETE FROM nodes",
		"ATTACH DATABASE '" + path + "' AS w; DELETE FROM w.nodes",
		"ATTACH DATABASE '" + path + "' AS w; DROP TABLE w.metrics",
		"ATTACH DATABASE '" + path + "' AS w",
		"VACUUM INTO '" + filepath.Join(outside, "x.db") + "'",
		"ATTACH DATABASE '" + filepath.Join(outside, "y.db") + "' AS x",
		"PRAGMA query_only = 0; DELETE FROM nodes",
		"CREATE TABLE evil (a)",
		"REPLACE INTO runs (run) VALUES ('r1')",
	}
	for _, q := range hostile {
		_, err := runSQLite(ctx, path, q)
		require.Error(t, err, "the connection must refuse: %s", q)
		_, err = QuerySQLite(ctx, path, q)
		require.ErrorIs(t, err, ErrRefused, q)
	}
	require.EqualValues(t, 1, count("nodes"))
	require.EqualValues(t, 1, count("metrics"))
	require.EqualValues(t, 1, count("phase_runs"))
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	require.Empty(t, entries, "no statement may create a file")

	_, err = QuerySQLite(ctx, path, "SELECT 1; SELECT 2")
	require.ErrorContains(t, err, "one statement per call, this query has 2")
	_, err = QuerySQLite(ctx, path, "DELETE FROM nodes")
	require.ErrorContains(t, err, "read-only: DELETE may change data or files")
	tab, err := QuerySQLite(ctx, path, "SELECT node FROM nodes WHERE node = 'n1';  -- trailing comment")
	require.NoError(t, err)
	require.Equal(t, [][]any{{"n1"}}, tab.Rows)
}

// TestSQLiteQueryTimeout: a query that would run for minutes ends at the
// context's deadline with an error that says so.
func TestSQLiteQueryTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hpcq.sqlite")
	s, err := OpenSQLite(path)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = QuerySQLite(ctx, path, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "ran out of time")
}

// TestClickHouseReadOnly: the statements that dropped a table or hung are
// refused by the server itself (readonly=1), promptly, and the data stays.
func TestClickHouseReadOnly(t *testing.T) {
	testutil.RequireBinary(t, "clickhouse-server", "scripts/services.sh install clickhouse")
	ctx := context.Background()
	c := testutil.StartService(t, "clickhouse")
	dsn := c.Env["HPCQ_CLICKHOUSE_DSN"]
	s, err := OpenClickHouse(ctx, ClickHouseOptions{DSN: dsn, SpoolDir: t.TempDir(), Name: "w1"})
	require.NoError(t, err)
	require.NoError(t, s.Write(ctx, hostileRows()))
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, s.Flush(fctx))
	require.NoError(t, s.Close())

	conn, err := chdb.Open(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close()
	count := func(table string) uint64 {
		t.Helper()
		tab, err := QueryClickHouse(ctx, conn, "SELECT count() FROM "+table)
		require.NoError(t, err)
		return tab.Rows[0][0].(uint64)
	}
	hostile := []string{
		"DROP TABLE metrics",
		"INSERT INTO nodes (run, node) VALUES ('x', 'y')",
		"INSERT INTO nodes (run, node) SELECT 'x', 'y'",
		"TRUNCATE TABLE phase_runs",
		"ALTER TABLE nodes DELETE WHERE 1",
		"CREATE TABLE evil (a UInt8) ENGINE = Memory",
		"OPTIMIZE TABLE nodes FINAL",
		"SET readonly = 0",
		"SELECT 1 SETTINGS readonly = 0",
	}
	for _, q := range hostile {
		qctx, qcancel := context.WithTimeout(ctx, 20*time.Second)
		_, err := runClickHouse(qctx, conn, q)
		qcancel()
		require.Error(t, err, "the server must refuse: %s", q)
		require.NotErrorIs(t, err, context.DeadlineExceeded, "refused at once, not hung: %s", q)
		if strings.HasPrefix(q, "SELECT") {
			continue // a read, refused by the server for its settings
		}
		_, err = QueryClickHouse(ctx, conn, q)
		require.ErrorIs(t, err, ErrRefused, q)
	}
	require.EqualValues(t, 1, count("nodes"))
	require.EqualValues(t, 1, count("metrics"))
	require.EqualValues(t, 1, count("phase_runs"))

	_, err = QueryClickHouse(ctx, conn, "SELECT 1; DROP TABLE metrics")
	require.ErrorContains(t, err, "one statement per call")
	tab, err := QueryClickHouse(ctx, conn, "SELECT node FROM nodes FINAL")
	require.NoError(t, err)
	require.Equal(t, [][]any{{"n1"}}, tab.Rows)

	qctx, qcancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer qcancel()
	start := time.Now()
	_, err = QueryClickHouse(qctx, conn, "SELECT count() FROM system.numbers WHERE sleepEachRow(0.001) = 0")
	require.Error(t, err)
	require.Less(t, time.Since(start), 15*time.Second, "the deadline ends the query")
}

func TestCheckStatement(t *testing.T) {
	for _, c := range []struct {
		d     Dialect
		q     string
		valid bool
	}{
		{DialectSQLite, "select 1", true},
		{DialectSQLite, "  /* c */ SELECT ';' -- ;\n ;", true},
		{DialectSQLite, `SELECT "a;b", [c;d] FROM t`, true},
		{DialectSQLite, "SELECT 'it''s;'", true},
		{DialectSQLite, "SELECT 1; DROP TABLE t", false},
		{DialectSQLite, "PRAGMA table_info(nodes)", false},
		{DialectSQLite, "", false},
		{DialectSQLite, " ; ; ", false},
		{DialectSQLite, "SELECT 'unterminated", false},
		{DialectSQLite, "SELECT 1 /* open", false},
		{DialectClickHouse, `SELECT 'a\';DROP TABLE t'`, true},
		{DialectClickHouse, "SHOW TABLES", true},
		{DialectClickHouse, "DESCRIBE TABLE nodes", true},
		{DialectClickHouse, "SELECT 1 # c ;\n", true},
		{DialectClickHouse, `SELECT 'a\';DROP TABLE t`, false},
		{DialectClickHouse, "KILL QUERY WHERE 1", false},
		{DialectClickHouse, "SYSTEM SHUTDOWN", false},
	} {
		err := CheckStatement(c.d, c.q)
		if c.valid {
			require.NoError(t, err, "%s: %q", c.d, c.q)
		} else {
			require.ErrorIs(t, err, ErrRefused, "%s: %q", c.d, c.q)
		}
	}
	require.Error(t, CheckStatement("mysql", "SELECT 1"))
}

// FuzzCheckStatement: the splitter never panics, and whatever it accepts is
// one statement starting with a read keyword.
func FuzzCheckStatement(f *testing.F) {
	for _, s := range []string{"SELECT 1", "SELECT ';'; DROP", "/* x */ WITH a AS (SELECT 1) SELECT * FROM a", "SELECT `a`", "SELECT [x]", "'", "\"\"\"", "--", "#"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		for _, d := range []Dialect{DialectSQLite, DialectClickHouse} {
			if CheckStatement(d, q) != nil {
				continue
			}
			stmts, err := splitStatements(d, q)
			if err != nil || len(stmts) != 1 {
				t.Fatalf("%s accepted %q: %v %v", d, q, stmts, err)
			}
		}
	})
}

// TestSQLiteAttachedReadOnly: a file the caller attaches (a run's memory)
// answers unqualified names, cannot be written through, and the query
// still cannot attach anything itself.
func TestSQLiteAttachedReadOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "hpcq.sqlite")
	s, err := OpenSQLite(path)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	mem := filepath.Join(dir, "memory.sqlite")
	db, err := sql.Open("sqlite", mem)
	require.NoError(t, err)
	_, err = db.Exec("CREATE TABLE things (a); INSERT INTO things VALUES (1), (2); CREATE VIEW notes AS SELECT a FROM things")
	require.NoError(t, err)
	require.NoError(t, db.Close())

	tab, err := QuerySQLite(ctx, path, "SELECT count(*) FROM notes", mem)
	require.NoError(t, err)
	require.EqualValues(t, 2, tab.Rows[0][0])
	_, err = runSQLite(ctx, path, "DELETE FROM mem.things", mem)
	require.Error(t, err, "the attached file is read-only")
	_, err = runSQLite(ctx, path, "ATTACH DATABASE '"+filepath.Join(dir, "x.db")+"' AS x", mem)
	require.Error(t, err)
	require.NoFileExists(t, filepath.Join(dir, "x.db"))
	tab, err = QuerySQLite(ctx, path, "SELECT count(*) FROM things", mem)
	require.NoError(t, err)
	require.EqualValues(t, 2, tab.Rows[0][0])
	_, err = QuerySQLite(ctx, path, "SELECT 1", "/tmp/it's.db")
	require.ErrorContains(t, err, "cannot attach")
}

func ptr[T any](v T) *T { return &v }

// TestCallIDsSortInOrder: call ids made one after the other sort in that
// order (the dashboard lists a node's calls by ts_ms, then call_id) and
// differ.
func TestCallIDsSortInOrder(t *testing.T) {
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = newID()
	}
	require.True(t, sort.StringsAreSorted(ids))
	seen := map[string]bool{}
	for _, id := range ids {
		require.Len(t, id, 32)
		require.False(t, seen[id], id)
		seen[id] = true
	}
}
