// Package stores opens a run's memory and results stores from the
// settings: Redis + ClickHouse and ClickHouse in cluster mode, else the
// SQLite files of the run directory. It is the one place that chooses a
// backend, for `scheduler run`, `exec` and `export` alike.
package stores

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/memory/cluster"
	"github.com/hpcq/hpcq/pkg/memory/sqlite"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// Memory backends, as run.json's "memory"."store" names them.
const (
	MemorySQLite  = "sqlite"
	MemoryCluster = "cluster"
)

// OpenMemory opens the memory of the run in dir: the cluster store when
// both Redis and ClickHouse are configured, else a SQLite file: file (an
// absolute path, the seed's db_path), or "" for the run directory's.
// halfLife is the decay half-life of a fact's confidence in ranking (0:
// memory.DefaultHalfLife). where says which store, without secrets, and
// the half-life, for run.json.
func OpenMemory(ctx context.Context, s config.Store, dir rundir.Dir, file string, halfLife time.Duration, log *slog.Logger) (st memory.Store, where map[string]string, err error) {
	if halfLife <= 0 {
		halfLife = memory.DefaultHalfLife
	}
	if s.RedisURL != "" && s.ClickHouseDSN != "" {
		st, where, err = openCluster(ctx, s, dir, halfLife, log)
		if where != nil {
			where["half_life"] = halfLife.String()
		}
		return st, where, err
	}
	if s.RedisURL != "" {
		log.Warn("HPCQ_REDIS_URL is set without HPCQ_CLICKHOUSE_DSN: the cluster memory needs both; the memory stays in the run's SQLite file")
	}
	where = map[string]string{"enabled": "true", "store": MemorySQLite, "file": rundir.MemoryDB, "half_life": halfLife.String()}
	if file != "" {
		where["file"] = file
	}
	st, err = openSQLite(dir, where)
	return st, where, err
}

// MemoryFile is the SQLite memory file of a run whose run.json says where
// (its "memory"), "" when the run keeps none.
func MemoryFile(dir rundir.Dir, where map[string]string) string {
	if where["store"] != MemorySQLite {
		return ""
	}
	f := where["file"]
	if f == "" {
		f = rundir.MemoryDB
	}
	if filepath.IsAbs(f) {
		return f
	}
	return dir.Path(f)
}

// ReopenMemory opens the memory store a run recorded in its run.json
// (where: its "memory"), for an export; the cluster store needs its servers
// configured.
func ReopenMemory(ctx context.Context, s config.Store, dir rundir.Dir, where map[string]string, log *slog.Logger) (memory.Store, error) {
	return reopenMemory(ctx, s, dir, where, false, log)
}

// ReadMemory is ReopenMemory for reading beside the run (the dashboard): a
// SQLite memory is opened read-only (sqlite.Options.ReadOnly), without its
// write lock, so that the run can go on or be resumed meanwhile; it shows
// the file as it was when opened.
func ReadMemory(ctx context.Context, s config.Store, dir rundir.Dir, where map[string]string, log *slog.Logger) (memory.Store, error) {
	return reopenMemory(ctx, s, dir, where, true, log)
}

func reopenMemory(ctx context.Context, s config.Store, dir rundir.Dir, where map[string]string, readOnly bool, log *slog.Logger) (memory.Store, error) {
	switch where["store"] {
	case MemorySQLite:
		if readOnly {
			st, err := sqlite.Open(MemoryFile(dir, where), sqlite.Options{Run: dir.ID(), HalfLife: halfLifeOf(where), ReadOnly: true})
			if err != nil {
				return nil, fmt.Errorf("read the run's memory: %w", err)
			}
			return st, nil
		}
		st, err := openSQLite(dir, where)
		if err != nil {
			return nil, fmt.Errorf("open the run's memory (is the run still going?): %w", err)
		}
		return st, nil
	case MemoryCluster:
		if err := needClusterServers(s, dir); err != nil {
			return nil, err
		}
		st, _, err := openCluster(ctx, s, dir, halfLifeOf(where), log)
		return st, err
	}
	return nil, nil // memory was off
}

// needClusterServers says what to set when the cluster memory of the run
// in dir cannot be reached with s.
func needClusterServers(s config.Store, dir rundir.Dir) error {
	if s.RedisURL == "" || s.ClickHouseDSN == "" {
		return fmt.Errorf("run %s keeps its memory in Redis and ClickHouse: set HPCQ_REDIS_URL and HPCQ_CLICKHOUSE_DSN", dir.ID())
	}
	return nil
}

// halfLifeOf is the half-life a run.json's memory records (0: the default,
// for a run written before it was recorded).
func halfLifeOf(where map[string]string) time.Duration {
	d, err := time.ParseDuration(where["half_life"])
	if err != nil {
		return 0
	}
	return d
}

func openCluster(ctx context.Context, s config.Store, dir rundir.Dir, halfLife time.Duration, log *slog.Logger) (memory.Store, map[string]string, error) {
	st, err := openClusterStore(ctx, s, dir, halfLife, log)
	if err != nil {
		return nil, nil, err
	}
	return st, map[string]string{"enabled": "true", "store": MemoryCluster, "redis": config.RedactURL(s.RedisURL),
		"clickhouse": config.RedactURL(s.ClickHouseDSN)}, nil
}

func openClusterStore(ctx context.Context, s config.Store, dir rundir.Dir, halfLife time.Duration, log *slog.Logger) (*cluster.Store, error) {
	return cluster.Open(ctx, clusterOptions(s, dir, halfLife, log))
}

// clusterOptions are the cluster store's options of the run in dir.
func clusterOptions(s config.Store, dir rundir.Dir, halfLife time.Duration, log *slog.Logger) cluster.Options {
	return cluster.Options{Run: dir.ID(), HalfLife: halfLife, RedisURL: s.RedisURL, RedisPassword: s.RedisPassword, RedisTLSCA: s.RedisTLSCA,
		ClickHouseDSN: s.ClickHouseDSN, SpoolDir: s.SpoolDir, Logger: log}
}

func openSQLite(dir rundir.Dir, where map[string]string) (memory.Store, error) {
	file := MemoryFile(dir, where)
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return nil, err
	}
	return sqlite.Open(file, sqlite.Options{Run: dir.ID(), HalfLife: halfLifeOf(where)})
}

// OpenResults opens where the run's results go: ClickHouse when a DSN is
// set (spooled under the name scheduler-<run>), else the SQLite file of the
// run directory. where says which, for run.json.
func OpenResults(ctx context.Context, s config.Store, dir rundir.Dir, log *slog.Logger) (sink results.Sink, where map[string]string, err error) {
	if s.ClickHouseDSN != "" {
		ch, err := results.OpenClickHouse(ctx, results.ClickHouseOptions{DSN: s.ClickHouseDSN, SpoolDir: s.SpoolDir,
			Name: "scheduler-" + dir.ID(), Logger: log})
		if err != nil {
			return nil, nil, err
		}
		return ch, map[string]string{"store": "clickhouse", "dsn": config.RedactURL(s.ClickHouseDSN)}, nil
	}
	sq, err := results.OpenSQLite(dir.Path(rundir.ResultsFile))
	if err != nil {
		return nil, nil, err
	}
	return sq, map[string]string{"store": "sqlite", "file": rundir.ResultsFile}, nil
}

// RecallWriter is a worker's writer of nodes' recall events into the
// cluster memory (Redis and ClickHouse, each run's store opened on first
// use, writes spooled in spoolDir while a server is away); nil when the
// settings do not name both servers: the events then go back to the
// scheduler with the results.
func RecallWriter(s config.Store, spoolDir string, log *slog.Logger) *memory.RecallWriter {
	if s.RedisURL == "" || s.ClickHouseDSN == "" {
		return nil
	}
	return memory.NewRecallWriter(func(ctx context.Context, run string) (memory.Store, func() error, error) {
		st, err := cluster.Open(ctx, cluster.Options{Run: run, RedisURL: s.RedisURL, RedisPassword: s.RedisPassword, RedisTLSCA: s.RedisTLSCA,
			ClickHouseDSN: s.ClickHouseDSN, SpoolDir: spoolDir, Logger: log})
		if err != nil {
			return nil, nil, err
		}
		return st, st.Close, nil
	})
}

// SharedRecall is the recall writer of in-process workers: the run's own
// store, which the run closes.
func SharedRecall(st memory.Store) *memory.RecallWriter {
	return memory.NewRecallWriter(func(context.Context, string) (memory.Store, func() error, error) { return st, nil, nil })
}
