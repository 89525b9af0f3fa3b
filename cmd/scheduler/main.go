// Command scheduler owns hpcq runs.
//
//	scheduler run [--local] [--run-dir DIR] IDEA_DIR      the LLM-driven tree search
//	scheduler run [--local] --resume RUN_DIR              continue a run after a crash
//	scheduler exec [--local] [--workers N] TASK.json...   run hand-written tasks
//	scheduler status [--run-dir DIR]                      a run's nodes and best metric; pools, backlog, workers
//	scheduler query [--run-dir DIR] [--format F] "SQL"    query a run's results
//	scheduler export [--run-dir DIR]                      write a run's report, tree and memory export again
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/hpcq/hpcq/pkg/dispatch"
	"github.com/hpcq/hpcq/pkg/local"
	"github.com/hpcq/hpcq/pkg/stores"

	"github.com/hpcq/hpcq/internal/chdb"
	"github.com/hpcq/hpcq/internal/cli"
	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/version"
	"github.com/hpcq/hpcq/pkg/engine"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/rundir"
)

const usage = `usage: scheduler <command> [flags] [args]

Commands:
  run [--local] [--workers N] [--slots N] [--run-dir DIR] IDEA_DIR   the tree search (IDEA_DIR: run.yaml, idea.md, resources.yaml?)
  run [--local] --resume RUN_DIR                           continue a run after a crash, kill -9 or interrupt
  exec [--local] [--workers N] [--slots N] TASK.json...   publish tasks, wait for their results, print a table
  status [--run-dir DIR]                                   a run's nodes and best metric; per pool pending / in flight / dead-lettered, workers
  query [--run-dir DIR] [--format table|csv|json] [--timeout D] "SQL"
                                                           one read-only SQL statement on a run's results (SQLite file or ClickHouse)
  export [--run-dir DIR]                                   write a run's report, tree.json/html and memory export again

Run "scheduler <command> -h" for the flags of a command.
`

// exitError carries an exit status without a message of its own.
type exitError = cli.ExitError

func main() { cli.Main("scheduler", route) }

func route(args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return exitError(2)
	}
	switch args[0] {
	case "exec":
		return cmdExec(args[1:])
	case "status":
		return cmdStatus(args[1:])
	case "query":
		return cmdQuery(args[1:])
	case "run":
		return cmdRun(args[1:])
	case "export":
		return cmdExport(args[1:])
	case "version", "--version":
		fmt.Println(version.Version)
		return nil
	case "-h", "--help", "help":
		fmt.Print(usage)
		return nil
	}
	fmt.Fprintf(os.Stderr, "scheduler: unknown command %q\n\n%s", args[0], usage)
	return exitError(2)
}

func newFlags(name string, cfg *config.Scheduler, args string) *flag.FlagSet {
	fs := flag.NewFlagSet("scheduler "+name, flag.ContinueOnError)
	config.AddCommonFlags(fs, &cfg.Common)
	fs.StringVar(&cfg.RunsDir, "runs-dir", cfg.RunsDir, "directory of run directories (env HPCQ_RUNS_DIR)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: scheduler %s [flags] %s\n\nFlags:\n", name, args)
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), "\nEnvironment:\n")
		config.Usage(fs.Output(), cfg)
	}
	return fs
}

func parse(fs *flag.FlagSet, args []string) error { return cli.Parse(fs, args) }

func cmdExec(args []string) error {
	var cfg config.Scheduler
	if err := config.Load(&cfg); err != nil {
		return err
	}
	fs := newFlags("exec", &cfg, "TASK.json...")
	local := fs.Bool("local", false, "start an embedded NATS server and in-process workers (default when no NATS URL is set)")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "in-process workers with --local (env HPCQ_LOCAL_WORKERS)")
	fs.IntVar(&cfg.Slots, "slots", cfg.Slots, "slots per in-process worker, default: cores (env HPCQ_SLOTS)")
	var pools []string
	fs.Var(config.ListFlag{P: &pools}, "pools", "pools of the in-process workers with --local (default: the pools of the tasks)")
	timeout := fs.Duration("timeout", 0, "give up waiting after this long (0: wait for every result)")
	jsonOut := fs.Bool("json", false, "print the results as JSON lines instead of a table")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return exitError(2)
	}
	log, err := cfg.Log.Logger(os.Stderr)
	if err != nil {
		return err
	}
	runID := dispatch.NewRunID()
	tasks, err := dispatch.LoadTasks(fs.Args(), runID)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	if cfg.NATS.URL == "" && !*local {
		log.Info("no NATS URL configured: running locally with an embedded server")
		*local = true
	}

	var q *queue.Queue
	runDir := filepath.Join(cfg.RunsDir, runID)
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return err
	}
	// A start that fails leaves no directory that would pass for the newest run.
	startedOK := false
	defer func() {
		if !startedOK {
			if err := os.RemoveAll(runDir); err != nil {
				log.Warn("could not remove the directory of a run that did not start", "dir", runDir, "err", err)
			}
		}
	}()
	sink, where, err := stores.OpenResults(ctx, cfg.Store, rundir.Dir(runDir), log)
	if err != nil {
		return err
	}
	workersWrite := *local || cfg.Store.ClickHouseDSN != ""
	defer logClose(log, "results", sink.Close)
	if *local {
		if len(pools) == 0 {
			seen := map[string]bool{}
			for _, t := range tasks {
				if !seen[t.Pool] {
					seen[t.Pool] = true
					pools = append(pools, t.Pool)
				}
			}
			sort.Strings(pools)
		}
		l, lctx, closeLocal, err := startLocal(ctx, &cfg, runDir, pools, sink, false, log)
		if err != nil {
			return err
		}
		defer closeLocal()
		q, ctx = l.Queue, lctx
		log.Info("local run", "run_dir", runDir, "workers", max(1, cfg.Workers), "pools", pools)
	} else {
		if q, err = queue.Dial(ctx, cfg.NATS.Conn("hpcq-scheduler"), cfg.Queue.Options(), log); err != nil {
			return err
		}
		defer q.Close()
	}
	mode := "cluster"
	if *local {
		mode = "local"
	}
	startedOK = true
	if err := writeRunJSON(rundir.Dir(runDir), mode, where, &cfg, len(tasks)); err != nil {
		log.Warn("run.json not written", "err", err)
	}
	started := time.Now()
	runRow := results.Run{Run: runID, Status: results.RunRunning, Title: "exec of " + strings.Join(fs.Args(), " "), Mode: mode, Config: "{}", TS: started}
	queued := results.Rows{Runs: []results.Run{runRow}}
	for _, t := range tasks {
		queued.Nodes = append(queued.Nodes, results.Node{Run: runID, Node: t.NodeID, Parent: t.ParentID, Stage: t.Stage, Kind: t.Kind,
			Pool: t.Pool, Attempt: t.Attempt, Status: results.NodeQueued, TS: started})
	}
	if err := sink.Write(ctx, queued); err != nil {
		log.Warn("results rows not written", "err", err)
	}
	outs, execErr := dispatch.Exec(ctx, q, dispatch.ExecParams{Tasks: tasks, RunID: runID, Logger: log})
	if outs == nil {
		return execErr
	}
	if err := sink.Write(context.Background(), dispatch.OutcomeRows(runRow, outs, !workersWrite)); err != nil {
		log.Warn("results rows not written", "err", err)
	}
	if err := dispatch.WriteResultsFile(filepath.Join(runDir, "results.jsonl"), outs); err != nil {
		log.Warn("results file not written", "err", err)
	}
	if *jsonOut {
		enc := json.NewEncoder(os.Stdout)
		for _, o := range outs {
			_ = enc.Encode(dispatch.OutcomeJSON(o))
		}
	} else if err := dispatch.WriteOutcomes(os.Stdout, outs); err != nil {
		return err
	}
	failed := 0
	for _, o := range outs {
		if !o.OK() {
			failed++
		}
	}
	if execErr != nil {
		return fmt.Errorf("%d of %d tasks without an answer: %w", dispatch.Unanswered(outs), len(outs), execErr)
	}
	if failed > 0 {
		log.Info("run finished with failures", "run_id", runID, "failed", failed, "tasks", len(outs))
		return exitError(1)
	}
	log.Info("run finished", "run_id", runID, "tasks", len(outs))
	return nil
}

// writeRunJSON records the run's resolved configuration, without secrets.
func writeRunJSON(dir rundir.Dir, mode string, where map[string]string, cfg *config.Scheduler, tasks int) error {
	natsURL := config.RedactURL(cfg.NATS.URL)
	if mode == "local" {
		natsURL = "embedded"
	}
	return dir.WriteInfo(rundir.Info{RunID: dir.ID(), Command: "exec", Mode: mode, NATSURL: natsURL, Tasks: tasks, Results: where,
		Version: version.Version, Started: time.Now().UTC(), LocalWorkers: cfg.Workers, Slots: cfg.Slots,
		Queue: map[string]any{"ack_wait": cfg.Queue.AckWait.String(), "max_deliver": cfg.Queue.MaxDeliver,
			"dedup_window": cfg.Queue.DedupWindow.String(), "heartbeat": cfg.Queue.Heartbeat.String()}})
}

func cmdStatus(args []string) error {
	var cfg config.Scheduler
	if err := config.Load(&cfg); err != nil {
		return err
	}
	fs := newFlags("status", &cfg, "")
	runDir := fs.String("run-dir", "", "run to inspect: its nodes and best metric, and a local run's queue (default: the newest under --runs-dir when no NATS URL is set)")
	jsonOut := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	log, err := cfg.Log.Logger(os.Stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	var q *queue.Queue
	var snap *engine.Snapshot
	if cfg.NATS.URL != "" && *runDir == "" {
		if q, err = queue.Dial(ctx, cfg.NATS.Conn("hpcq-status"), cfg.Queue.Options(), log); err != nil {
			return err
		}
		defer q.Close()
	} else {
		dir := *runDir
		if dir == "" {
			if dir, err = newestRun(cfg.RunsDir); err != nil {
				return err
			}
		}
		// A tree search's nodes, from its files: readable while it goes.
		if s, err := engine.ReadSnapshot(dir); err == nil {
			snap = &s
		}
		if snap != nil && !*jsonOut {
			if err := snap.Write(os.Stdout); err != nil {
				return err
			}
			fmt.Println()
		}
		if cfg.NATS.URL != "" {
			if q, err = queue.Dial(ctx, cfg.NATS.Conn("hpcq-status"), cfg.Queue.Options(), log); err != nil {
				return err
			}
			defer q.Close()
		} else {
			store := rundir.Dir(dir).Path(rundir.NATSDir)
			if _, err := os.Stat(store); err != nil {
				return fmt.Errorf("run dir %s has no local NATS store: %w", dir, err)
			}
			srv, err := queue.StartEmbedded(queue.EmbeddedOptions{StoreDir: store})
			if err != nil {
				if snap != nil && errors.Is(err, queue.ErrStoreInUse) {
					// The run holds its store: its queue is its own until it ends.
					if *jsonOut {
						return json.NewEncoder(os.Stdout).Encode(map[string]any{"run": snap})
					}
					fmt.Println("(the run is going: its embedded queue is readable once it ends)")
					return nil
				}
				if errors.Is(err, queue.ErrStoreInUse) {
					return fmt.Errorf("the run is going (its process holds its NATS store); status reads its queue once it ends: %w", err)
				}
				return fmt.Errorf("open the run's NATS store: %w", err)
			}
			defer srv.Shutdown()
			nc, err := srv.Connect("hpcq-status")
			if err != nil {
				return err
			}
			defer nc.Close()
			if q, err = queue.New(ctx, nc, cfg.Queue.Options(), log); err != nil {
				return err
			}
			if snap == nil && !*jsonOut {
				fmt.Printf("run %s (local)\n\n", filepath.Base(dir))
			}
		}
	}
	stats, err := q.Stats(ctx)
	if err != nil {
		return err
	}
	workers, err := q.Workers(ctx)
	if err != nil {
		return err
	}
	if *jsonOut {
		out := map[string]any{"pools": stats, "workers": workers}
		if snap != nil {
			out["run"] = snap
		}
		return json.NewEncoder(os.Stdout).Encode(out)
	}
	return dispatch.WriteStats(os.Stdout, stats, workers)
}

func newestRun(runsDir string) (string, error) {
	entries, err := os.ReadDir(runsDir)
	if err != nil {
		return "", fmt.Errorf("no NATS URL set and no runs in %s: %w", runsDir, err)
	}
	for i := len(entries) - 1; i >= 0; i-- {
		if entries[i].IsDir() {
			return filepath.Join(runsDir, entries[i].Name()), nil
		}
	}
	return "", fmt.Errorf("no NATS URL set and no runs in %s", runsDir)
}

// cmdQuery runs SQL on a run's results: the SQLite file of a local run (or
// of a cluster run without ClickHouse), or ClickHouse when the run's
// run.json says so or, without --run-dir, when HPCQ_CLICKHOUSE_DSN is set.
func cmdQuery(args []string) error {
	var cfg config.Scheduler
	if err := config.Load(&cfg); err != nil {
		return err
	}
	fs := newFlags("query", &cfg, `"SQL"`)
	runDir := fs.String("run-dir", "", "run whose results to query (default: ClickHouse if HPCQ_CLICKHOUSE_DSN is set, else the newest run under --runs-dir)")
	format := fs.String("format", "table", "table, csv or json")
	timeout := fs.Duration("timeout", results.DefaultQueryTimeout, "stop the query after this long")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitError(2)
	}
	switch *format {
	case "table", "csv", "json":
	default:
		fmt.Fprintf(os.Stderr, "scheduler query: --format %q: must be table, csv or json\n", *format)
		return exitError(2)
	}
	if *timeout <= 0 {
		fmt.Fprintf(os.Stderr, "scheduler query: --timeout %v: must be positive\n", *timeout)
		return exitError(2)
	}
	query := fs.Arg(0)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	store := "clickhouse"
	dir := *runDir
	if dir != "" || cfg.Store.ClickHouseDSN == "" {
		if dir == "" {
			var err error
			if dir, err = newestRun(cfg.RunsDir); err != nil {
				return err
			}
		}
		info, err := rundir.Dir(dir).ReadInfo()
		if err != nil {
			return fmt.Errorf("%s is not a run directory: %w", dir, err)
		}
		store = info.Results["store"]
		if store == "" {
			store = "sqlite" // runs recorded before results were kept
		}
	}
	var tab *results.Table
	var err error
	switch store {
	case "clickhouse":
		if cfg.Store.ClickHouseDSN == "" {
			return fmt.Errorf("run %s keeps its results in ClickHouse: set HPCQ_CLICKHOUSE_DSN (or --clickhouse-dsn)", dir)
		}
		conn, cerr := chdb.Open(ctx, cfg.Store.ClickHouseDSN)
		if cerr != nil {
			return cerr
		}
		defer conn.Close()
		qctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		tab, err = results.QueryClickHouse(qctx, conn, query)
	default:
		path := rundir.Dir(dir).Path(rundir.ResultsFile)
		if _, serr := os.Stat(path); serr != nil {
			return fmt.Errorf("run %s has no results file: %w", dir, serr)
		}
		qctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		tab, err = results.QuerySQLite(qctx, path, query)
	}
	if err != nil {
		return err
	}
	return tab.Write(os.Stdout, *format)
}

// startLocal starts the embedded server and the in-process workers of a
// local run (with gateway, their installer asks the model through the
// run's LLM gateway). The returned context ends when a local worker fails:
// nothing would run the tasks any more. closeLocal drains the workers and
// stops the server.
func startLocal(ctx context.Context, cfg *config.Scheduler, runDir string, pools []string, sink results.Sink, gateway bool,
	log *slog.Logger) (*local.Cluster, context.Context, func(), error) {
	// The in-process workers read the settings a worker process reads
	// (HPCQ_KILL_GRACE, HPCQ_MAX_OUTPUT_BYTES, HPCQ_FETCH_WAIT, HPCQ_ISOLATION,
	// ...), but never exit when idle: the run decides when they stop.
	wc := cfg.Tasks.Worker(pools)
	wc.IdleExit, wc.Version, wc.Results = 0, version.Version, sink
	l, err := local.Start(ctx, local.Params{
		RunDir: runDir, Workers: cfg.Workers, Queue: cfg.Queue.Options(), Logger: log, GatewayInstaller: gateway,
		Phases: cfg.Tasks.Phases(""), Worker: wc,
	})
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-l.Failed():
			log.Error("a local worker failed; giving up on the tasks without an answer")
			cancel(errors.New("a local worker failed"))
		case <-ctx.Done():
		}
	}()
	return l, ctx, func() {
		cancel(nil)
		logClose(log, "local workers", l.Close)
	}, nil
}
