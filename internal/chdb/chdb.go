package chdb

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Open connects to the DSN (clickhouse://user:password@host:port/database,
// ?secure=true for TLS) over the native protocol and checks the server answers.
func Open(ctx context.Context, dsn string) (driver.Conn, error) {
	opts, err := clickhouse.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("chdb: HPCQ_CLICKHOUSE_DSN: %w", err)
	}
	if opts.DialTimeout == 0 || opts.DialTimeout > 5*time.Second {
		opts.DialTimeout = 5 * time.Second
	}
	conn, err := clickhouse.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("chdb: clickhouse: %w", err)
	}
	err = conn.Ping(ctx)
	var ex *clickhouse.Exception
	if err != nil && errors.As(err, &ex) && ex.Code == unknownDatabase {
		// The database of the DSN is made on first use.
		conn.Close()
		if err := createDatabase(ctx, *opts); err != nil {
			return nil, err
		}
		if conn, err = clickhouse.Open(opts); err != nil {
			return nil, fmt.Errorf("chdb: clickhouse: %w", err)
		}
		err = conn.Ping(ctx)
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("chdb: clickhouse at %s: %w", strings.Join(opts.Addr, ","), err)
	}
	return conn, nil
}

// unknownDatabase is ClickHouse's error code UNKNOWN_DATABASE.
const unknownDatabase = 81

// createDatabase creates the database opts names, connected to the
// server's default database.
func createDatabase(ctx context.Context, opts clickhouse.Options) error {
	name := opts.Auth.Database
	for _, r := range name {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return fmt.Errorf("chdb: database %q: only letters, digits and '_' (create it yourself otherwise)", name)
		}
	}
	opts.Auth.Database = "default"
	conn, err := clickhouse.Open(&opts)
	if err != nil {
		return fmt.Errorf("chdb: clickhouse: %w", err)
	}
	defer conn.Close()
	if err := conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+name); err != nil {
		return fmt.Errorf("chdb: create database %s: %w", name, err)
	}
	return nil
}

// Migrate applies the embedded schema migrations that the database does not
// record yet, in order. Every statement is idempotent (CREATE ... IF NOT
// EXISTS; an ADD COLUMN of one column whose "already exists" counts as
// done, this server having no ADD COLUMN IF NOT EXISTS), so processes that
// start together may both run it.
func Migrate(ctx context.Context, conn driver.Conn) error {
	if err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS hpcq_migrations (version UInt32, name String, applied DateTime)
ENGINE = ReplacingMergeTree() ORDER BY version`); err != nil {
		return fmt.Errorf("chdb: migrations table: %w", err)
	}
	done := map[uint32]bool{}
	rows, err := conn.Query(ctx, `SELECT version FROM hpcq_migrations`)
	if err != nil {
		return fmt.Errorf("chdb: read migrations: %w", err)
	}
	for rows.Next() {
		var v uint32
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return err
		}
		done[v] = true
	}
	rows.Close()
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		base := strings.TrimPrefix(name, "migrations/")
		v, err := strconv.ParseUint(strings.SplitN(base, "_", 2)[0], 10, 32)
		if err != nil {
			return fmt.Errorf("chdb: migration %s: no version prefix", base)
		}
		if done[uint32(v)] {
			continue
		}
		data, err := migrationFiles.ReadFile(name)
		if err != nil {
			return err
		}
		// Comments go first: they may hold semicolons.
		for _, stmt := range strings.Split(stripComments(string(data)), ";") {
			if strings.TrimSpace(stmt) == "" {
				continue
			}
			if err := conn.Exec(ctx, stmt); err != nil {
				if addedBefore(stmt, err) {
					continue
				}
				return fmt.Errorf("chdb: migration %s: %w\n%s", base, err, strings.TrimSpace(stmt))
			}
		}
		b, err := conn.PrepareBatch(ctx, `INSERT INTO hpcq_migrations (version, name, applied)`)
		if err != nil {
			return fmt.Errorf("chdb: record migration %s: %w", base, err)
		}
		if err := b.Append(uint32(v), base, time.Now()); err != nil {
			return err
		}
		if err := b.Send(); err != nil {
			return fmt.Errorf("chdb: record migration %s: %w", base, err)
		}
	}
	return nil
}

// addedBefore: stmt adds one column, which err says exists already.
func addedBefore(stmt string, err error) bool {
	return strings.Count(strings.ToUpper(stmt), "ADD COLUMN") == 1 && strings.Contains(err.Error(), "already exists")
}

func stripComments(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
