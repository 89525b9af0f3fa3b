package results

import (
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
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

// QuerySQLite runs a query on a run's SQLite file, read-only.
func QuerySQLite(ctx context.Context, path, query string) (*Table, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return nil, &QueryError{query, err}
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, &QueryError{query, err}
	}
	t := &Table{Columns: cols}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, &QueryError{query, err}
		}
		for i, v := range vals {
			if b, ok := v.([]byte); ok {
				vals[i] = string(b)
			}
		}
		t.Rows = append(t.Rows, vals)
	}
	if err := rows.Err(); err != nil {
		return nil, &QueryError{query, err}
	}
	return t, nil
}

// QueryClickHouse runs a query on ClickHouse.
func QueryClickHouse(ctx context.Context, conn driver.Conn, query string) (*Table, error) {
	rows, err := conn.Query(ctx, query)
	if err != nil {
		return nil, &QueryError{query, err}
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
			return nil, &QueryError{query, err}
		}
		vals := make([]any, len(ptrs))
		for i, p := range ptrs {
			vals[i] = reflect.ValueOf(p).Elem().Interface()
		}
		t.Rows = append(t.Rows, vals)
	}
	if err := rows.Err(); err != nil {
		return nil, &QueryError{query, err}
	}
	return t, nil
}

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
		out := make([]map[string]any, len(t.Rows))
		for i, r := range t.Rows {
			m := make(map[string]any, len(r))
			for j, v := range r {
				if tm, ok := v.(time.Time); ok {
					v = tm.UTC().Format(time.DateTime)
				}
				m[t.Columns[j]] = v
			}
			out[i] = m
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	return fmt.Errorf("results: format %q: must be table, csv or json", format)
}
