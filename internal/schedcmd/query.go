package schedcmd

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/hpcq/hpcq/internal/chdb"
	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/stores"
	"github.com/hpcq/hpcq/internal/term"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// QueryOptions are what `scheduler query` is asked.
type QueryOptions struct {
	// RunDir is the run; without it, ClickHouse when configured, else the
	// newest run.
	RunDir  string
	SQL     string
	Format  string // table, csv or json
	Timeout time.Duration
}

// Query runs one read-only statement on a run's results: the SQLite file of
// a local run (or of a cluster run without ClickHouse), or ClickHouse when
// the run's run.json says so or, without RunDir, when it is configured.
func Query(ctx context.Context, cfg *config.Scheduler, o QueryOptions) error {
	dir := o.RunDir
	if dir == "" && cfg.Store.ClickHouseDSN == "" {
		var err error
		if dir, err = newestRun(cfg.RunsDir); err != nil {
			return err
		}
	}
	qctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	tab, err := queryRun(qctx, cfg, dir, o.SQL)
	if err != nil {
		return err
	}
	return tab.Write(term.Stdout(), o.Format)
}

// queryRun runs one read-only statement on the results of the run in dir,
// where its run.json says they are; dir "" is ClickHouse.
func queryRun(ctx context.Context, cfg *config.Scheduler, dir, sql string) (*results.Table, error) {
	store := "clickhouse"
	var info rundir.Info
	if dir != "" {
		var err error
		info, err = rundir.Dir(dir).ReadInfo()
		if err != nil {
			return nil, fmt.Errorf("%s is not a run directory: %w", dir, err)
		}
		store = info.Results["store"]
		if store == "" {
			store = "sqlite" // runs recorded before results were kept
		}
	}
	if store == "clickhouse" {
		if cfg.Store.ClickHouseDSN == "" {
			return nil, fmt.Errorf("run %s keeps its results in ClickHouse: set HPCQ_CLICKHOUSE_DSN (or --clickhouse-dsn)", dir)
		}
		conn, err := chdb.Open(ctx, cfg.Store.ClickHouseDSN)
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		return results.QueryClickHouse(ctx, conn, sql)
	}
	path := rundir.Dir(dir).Path(rundir.ResultsFile)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("run %s has no results file: %w", dir, err)
	}
	// The memory's tables (archival, recall_events) are in the memory
	// file: attached read-only, so the documented queries on them work.
	var attach []string
	if mem := stores.MemoryFile(rundir.Dir(dir), info.Memory); mem != "" && fileExists(mem) {
		attach = append(attach, mem)
	}
	return results.QuerySQLite(ctx, path, sql, attach...)
}

func fileExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}
