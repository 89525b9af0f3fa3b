package results

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Table is a query's answer.
type Table struct {
	Columns []string
	Rows    [][]any
}

// QueryError is a database's error for a query, with the query.
type QueryError struct {
	Query string
	Err   error
}

func (e *QueryError) Error() string { return fmt.Sprintf("%v\nquery: %s", e.Err, e.Query) }
func (e *QueryError) Unwrap() error { return e.Err }

// DefaultQueryTimeout bounds a query whose context has no deadline.
const DefaultQueryTimeout = 60 * time.Second

// sqliteLimitAttached is SQLITE_LIMIT_ATTACHED: at 0, ATTACH (and VACUUM
// INTO, which attaches its target) fail.
const sqliteLimitAttached = 7

// QuerySQLite runs one read statement on a run's SQLite file. The statement
// is checked first (CheckStatement: ErrRefused with the reason); then it
// runs on a connection that cannot write anything: the file is opened
// read-only, query_only and defensive mode are on, and no database can be
// attached, so no statement can create, change or vacuum a file. Without a
// deadline in ctx, the query stops after DefaultQueryTimeout.
//
// attach names other SQLite files to open read-only beside it (as mem, mem2,
// ...), before attaching is closed to the query: a run's memory file, whose
// archival and recall_events views then answer unqualified names.
func QuerySQLite(ctx context.Context, path, query string, attach ...string) (*Table, error) {
	if err := CheckStatement(DialectSQLite, query); err != nil {
		return nil, err
	}
	return runSQLite(ctx, path, query, attach...)
}

// runSQLite is QuerySQLite without the statement check: the database's
// read-only mode alone.
func runSQLite(ctx context.Context, path, query string, attach ...string) (*Table, error) {
	ctx, cancel := withQueryTimeout(ctx)
	defer cancel()
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_defensive=1&_pragma=query_only(1)&_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("results: open %s: %w", path, err)
	}
	defer conn.Close()
	for i, a := range attach {
		name := "mem"
		if i > 0 {
			name = fmt.Sprintf("mem%d", i+1)
		}
		if strings.ContainsAny(a, "'?#") {
			return nil, fmt.Errorf("results: cannot attach %q: quotes, '?' and '#' are not allowed in the path", a)
		}
		if _, err := conn.ExecContext(ctx, "ATTACH DATABASE 'file:"+a+"?mode=ro' AS "+name); err != nil {
			return nil, fmt.Errorf("results: attach %s read-only: %w", a, err)
		}
	}
	if _, err := sqlite.Limit(conn, sqliteLimitAttached, 0); err != nil {
		return nil, fmt.Errorf("results: open %s read-only: %w", path, err)
	}
	rows, err := conn.QueryContext(ctx, query)
	if err != nil {
		return nil, queryError(ctx, query, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, queryError(ctx, query, err)
	}
	t := &Table{Columns: cols}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, queryError(ctx, query, err)
		}
		for i, v := range vals {
			if b, ok := v.([]byte); ok {
				vals[i] = string(b)
			}
		}
		t.Rows = append(t.Rows, vals)
	}
	if err := rows.Err(); err != nil {
		return nil, queryError(ctx, query, err)
	}
	return t, nil
}

// QueryClickHouse runs one read statement on ClickHouse. The statement is
// checked first (CheckStatement: ErrRefused with the reason); then it runs
// with the session setting readonly=1, so the server refuses anything that
// writes, creates, drops or changes a setting, and with max_execution_time
// from ctx's deadline (DefaultQueryTimeout without one).
func QueryClickHouse(ctx context.Context, conn driver.Conn, query string) (*Table, error) {
	if err := CheckStatement(DialectClickHouse, query); err != nil {
		return nil, err
	}
	return runClickHouse(ctx, conn, query)
}

// runClickHouse is QueryClickHouse without the statement check: the
// server's read-only mode alone.
func runClickHouse(ctx context.Context, conn driver.Conn, query string) (*Table, error) {
	ctx, cancel := withQueryTimeout(ctx)
	defer cancel()
	settings := clickhouse.Settings{"readonly": 1}
	if dl, ok := ctx.Deadline(); ok {
		if s := int(math.Ceil(time.Until(dl).Seconds())); s > 0 {
			settings["max_execution_time"] = s
		}
	}
	rows, err := conn.Query(clickhouse.Context(ctx, clickhouse.WithSettings(settings)), query)
	if err != nil {
		return nil, queryError(ctx, query, err)
	}
	defer rows.Close()
	types := rows.ColumnTypes()
	t := &Table{Columns: rows.Columns()}
	for rows.Next() {
		ptrs := make([]any, len(types))
		for i, ct := range types {
			ptrs[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, queryError(ctx, query, err)
		}
		vals := make([]any, len(ptrs))
		for i, p := range ptrs {
			vals[i] = reflect.ValueOf(p).Elem().Interface()
		}
		t.Rows = append(t.Rows, vals)
	}
	if err := rows.Err(); err != nil {
		return nil, queryError(ctx, query, err)
	}
	return t, nil
}

// withQueryTimeout gives ctx DefaultQueryTimeout when it has no deadline.
func withQueryTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, DefaultQueryTimeout)
}

// queryError wraps a database's error with the query; a query stopped by
// its deadline says so rather than showing whatever the driver reported.
// A write the database refused for its read-only mode wraps ErrRefused.
func queryError(ctx context.Context, query string, err error) error {
	var se *sqlite.Error
	var ce *clickhouse.Exception
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		err = fmt.Errorf("the query ran out of time (--timeout): %w", context.DeadlineExceeded)
	case errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_READONLY,
		errors.As(err, &ce) && ce.Code == clickhouseReadonly:
		err = fmt.Errorf("%w: queries are read-only and the database refused a write: %w", ErrRefused, err)
	}
	return &QueryError{query, err}
}

// clickhouseReadonly is ClickHouse's error code READONLY.
const clickhouseReadonly = 164

// text renders one value for the table and csv formats.
func text(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case string:
		return x
	case time.Time:
		return x.UTC().Format(time.DateTime)
	case *time.Time:
		if x == nil {
			return "NULL"
		}
		return x.UTC().Format(time.DateTime)
	case float64:
		return fmt.Sprintf("%g", x)
	case float32:
		return fmt.Sprintf("%g", x)
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return "NULL"
		}
		return text(rv.Elem().Interface())
	}
	if rv.Kind() == reflect.Slice {
		parts := make([]string, rv.Len())
		for i := range parts {
			parts[i] = text(rv.Index(i).Interface())
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return fmt.Sprint(v)
}

// Write prints the table as format: table (aligned columns), csv (with a
// header) or json (an array of objects, one per row).
func (t *Table) Write(w io.Writer, format string) error {
	switch format {
	case "", "table":
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(t.Columns, "\t"))
		for _, r := range t.Rows {
			cells := make([]string, len(r))
			for i, v := range r {
				cells[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(text(v))
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		return tw.Flush()
	case "csv":
		cw := csv.NewWriter(w)
		if err := cw.Write(t.Columns); err != nil {
			return err
		}
		for _, r := range t.Rows {
			cells := make([]string, len(r))
			for i, v := range r {
				cells[i] = text(v)
			}
			if err := cw.Write(cells); err != nil {
				return err
			}
		}
		cw.Flush()
		return cw.Error()
	case "json":
		// An array of objects whose keys keep the SELECT's column order
		// (a map would sort them).
		var b bytes.Buffer
		b.WriteString("[")
		for i, r := range t.Rows {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString("\n  {")
			for j, v := range r {
				if tm, ok := v.(time.Time); ok {
					v = tm.UTC().Format(time.DateTime)
				}
				k, err := json.Marshal(t.Columns[j])
				if err != nil {
					return err
				}
				val, err := json.Marshal(v)
				if err != nil {
					return err
				}
				if j > 0 {
					b.WriteString(", ")
				}
				b.Write(k)
				b.WriteString(": ")
				b.Write(val)
			}
			b.WriteString("}")
		}
		if len(t.Rows) > 0 {
			b.WriteString("\n")
		}
		b.WriteString("]\n")
		_, err := w.Write(b.Bytes())
		return err
	}
	return fmt.Errorf("results: format %q: must be table, csv or json", format)
}
