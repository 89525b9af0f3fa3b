package schedcmd

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hpcq/hpcq/internal/chdb"
	"github.com/hpcq/hpcq/internal/cli"
	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/stores"
	"github.com/hpcq/hpcq/internal/term"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// QueryOptions are what `scheduler query` is asked.
type QueryOptions struct {
	// RunDir is the run; without it, the run Run names in ClickHouse, or
	// every run there with AllRuns, else the newest run's directory.
	RunDir  string
	Run     string
	AllRuns bool
	SQL     string
	Format  string // table, csv or json
	Timeout time.Duration
}

// Query runs one read-only statement on a run's results: the SQLite file of
// a local run (or of a cluster run without ClickHouse), or ClickHouse when
// the run's run.json says so or when the run is named by its id. On
// ClickHouse, which holds many runs, each of hpcq's tables the statement
// reads is that run's rows, FINAL (results.ScopeToRun); every run's only
// with AllRuns. Which run it answered for goes to stderr (with the
// table format: csv and json are for programs).
func Query(ctx context.Context, cfg *config.Scheduler, o QueryOptions) error {
	dir, sql := o.RunDir, o.SQL
	run := o.Run
	switch {
	case dir != "" && run != "":
		return fmt.Errorf("%w: --run-dir and --run name the run twice: give one", cli.ErrInvalidInput)
	case dir != "" || run != "":
	case cfg.Store.ClickHouseDSN != "" && !o.AllRuns:
		return fmt.Errorf("%w: ClickHouse holds many runs: name one (--run-dir DIR, or --run ID), or ask for every run with --all-runs", cli.ErrInvalidInput)
	case cfg.Store.ClickHouseDSN == "":
		var err error
		if dir, err = newestRun(cfg.RunsDir); err != nil {
			return err
		}
	}
	store, id, err := runStore(dir)
	if err != nil {
		return err
	}
	if dir != "" {
		run = cmp.Or(id, filepath.Base(dir))
	}
	said := fmt.Sprintf("run %s (%s)", run, dir)
	switch {
	case store == "clickhouse" && o.AllRuns:
		said = "every run in ClickHouse (--all-runs: scope a query yourself with WHERE run = '...' and FINAL)"
	case store == "clickhouse":
		if sql, err = results.ScopeToRun(sql, run); err != nil {
			return fmt.Errorf("%w: %w", cli.ErrInvalidInput, err)
		}
		said = fmt.Sprintf("run %s in ClickHouse (each table read as that run's rows, FINAL; --all-runs for every run)", run)
	}
	qctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	tab, err := queryRun(qctx, cfg, dir, sql)
	if err != nil {
		return err
	}
	if o.Format == "table" { // csv and json are read by programs: their streams stay theirs
		fmt.Fprintf(term.Stderr(), "answered for %s\n", said)
	}
	return tab.Write(term.Stdout(), o.Format)
}

// runStore is where the results of the run in dir are ("clickhouse" or
// "sqlite"; dir "": ClickHouse) and the run's id.
func runStore(dir string) (store, run string, err error) {
	if dir == "" {
		return "clickhouse", "", nil
	}
	info, err := rundir.Dir(dir).ReadInfo()
	if err != nil {
		return "", "", fmt.Errorf("%s is not a run directory: %w", dir, err)
	}
	return cmp.Or(info.Results["store"], "sqlite"), info.RunID, nil
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
