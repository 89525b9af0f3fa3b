// The definitions of scheduler's commands: their flags, the arguments
// they take, and what they run (control.go: ls, logs, cancel, purge, serve, check).

package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/schedcmd"
	"github.com/hpcq/hpcq/pkg/results"
)

// runDirFlag is --run-dir of the commands about one run.
func runDirFlag(fs *flag.FlagSet) *string {
	return fs.String("run-dir", "", "the run (default: the newest under --runs-dir)")
}

func noArgs(fs *flag.FlagSet) func() bool { return func() bool { return fs.NArg() == 0 } }

func defineExec(fs *flag.FlagSet, cfg *config.Scheduler) (func() bool, func(context.Context, *slog.Logger) error) {
	local := fs.Bool("local", false, "start an embedded NATS server and in-process workers (default when no NATS URL is set)")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, config.Help(cfg, &cfg.Workers, "in-process workers with --local"))
	fs.IntVar(&cfg.Slots, "slots", cfg.Slots, config.Help(cfg, &cfg.Slots, "slots per in-process worker, default: cores"))
	var pools []string
	fs.Var(config.ListFlag{P: &pools}, "pools", "pools of the in-process workers with --local (default: the pools of the tasks)")
	timeout := fs.Duration("timeout", 0, "give up waiting after this long (0: wait for every result)")
	jsonOut := fs.Bool("json", false, "print the results as JSON lines instead of a table")
	return func() bool { return fs.NArg() > 0 }, func(ctx context.Context, log *slog.Logger) error {
		if *timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, *timeout)
			defer cancel()
		}
		return schedcmd.Exec(ctx, cfg, schedcmd.ExecOptions{Local: *local, Pools: pools, Files: fs.Args(), JSON: *jsonOut, Log: log})
	}
}

func defineStatus(fs *flag.FlagSet, cfg *config.Scheduler) (func() bool, func(context.Context, *slog.Logger) error) {
	runDir := fs.String("run-dir", "", "run to inspect: its nodes and best metric, and its queue (default: the newest under --runs-dir when no NATS URL is set)")
	jsonOut := fs.Bool("json", false, "print JSON")
	return noArgs(fs), func(ctx context.Context, log *slog.Logger) error {
		return schedcmd.Status(ctx, cfg, schedcmd.StatusOptions{RunDir: *runDir, JSON: *jsonOut, Log: log})
	}
}

func defineQuery(fs *flag.FlagSet, cfg *config.Scheduler) (func() bool, func(context.Context, *slog.Logger) error) {
	runDir := fs.String("run-dir", "", "run whose results to query (default: the newest run under --runs-dir; with HPCQ_CLICKHOUSE_DSN, --run or --all-runs)")
	runID := fs.String("run", "", "on ClickHouse: the id of the run whose rows to query (each table read as its rows, FINAL)")
	allRuns := fs.Bool("all-runs", false, "on ClickHouse: query every run's rows as the tables hold them")
	format := fs.String("format", "table", "table, csv or json")
	timeout := fs.Duration("timeout", results.DefaultQueryTimeout, "stop the query after this long")
	return func() bool { return fs.NArg() == 1 }, func(ctx context.Context, _ *slog.Logger) error {
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
		return schedcmd.Query(ctx, cfg, schedcmd.QueryOptions{RunDir: *runDir, Run: *runID, AllRuns: *allRuns, SQL: fs.Arg(0), Format: *format, Timeout: *timeout})
	}
}

func defineRun(fs *flag.FlagSet, cfg *config.Scheduler) (func() bool, func(context.Context, *slog.Logger) error) {
	local := fs.Bool("local", false, "start an embedded NATS server and in-process workers (default when no NATS URL is set)")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, config.Help(cfg, &cfg.Workers, "in-process workers with --local"))
	fs.IntVar(&cfg.Slots, "slots", cfg.Slots, config.Help(cfg, &cfg.Slots, "slots per in-process worker, default: cores"))
	runDir := fs.String("run-dir", "", "the run's directory (default: --runs-dir/<run id>)")
	resume := fs.String("resume", "", "continue the run in this directory after a crash or an interrupt")
	metricsAddr := fs.String("metrics-addr", "", "serve only Prometheus metrics at http://ADDR/metrics while the run goes (--http serves them too)")
	httpAddr := fs.String("http", "", "serve the live dashboard, the JSON API and /metrics at http://ADDR/ while the run goes (127.0.0.1:PORT; another address needs HPCQ_HTTP_TOKEN)")
	config.AddMemoryFlags(fs, &cfg.Memory)
	waitWorkers := fs.Duration("wait-workers", 0, "how long to wait at start for a live worker of the run's pool before the first nodes are published (default: no wait; workers slurm-bridge starts come when tasks wait, and the prompts describe the pool's toolchains once a worker registered)")
	argsOK := func() bool { return (*resume == "") == (fs.NArg() == 1) && (*resume == "" || fs.NArg() == 0) }
	return argsOK, func(ctx context.Context, log *slog.Logger) error {
		o := schedcmd.RunOptions{Local: *local, IdeaDir: fs.Arg(0), RunDir: *runDir, Resume: *resume, WaitWorkers: *waitWorkers,
			MetricsAddr: *metricsAddr, HTTP: *httpAddr, Log: log, Abandon: secondInterrupt(ctx)}
		if screen != nil {
			o.Status = screen
		}
		return schedcmd.Run(ctx, cfg, o)
	}
}

func defineExport(fs *flag.FlagSet, cfg *config.Scheduler) (func() bool, func(context.Context, *slog.Logger) error) {
	runDir := runDirFlag(fs)
	return noArgs(fs), func(ctx context.Context, log *slog.Logger) error {
		return schedcmd.Export(ctx, cfg, schedcmd.ExportOptions{RunDir: *runDir, Log: log})
	}
}

func defineWriteup(fs *flag.FlagSet, cfg *config.Scheduler) (func() bool, func(context.Context, *slog.Logger) error) {
	runDir := runDirFlag(fs)
	check := fs.String("check", "", "a LaTeX paper whose numbers, \\fact ids and citations are checked against the run's facts and the idea's refs.bib (exit 1: one is not)")
	pdf := fs.Bool("pdf", false, "with --check: compile the paper in a task's sandbox (latexmk -pdf) into paper/paper.pdf and its pages' PNGs")
	facts := fs.Bool("facts", false, "write the run's facts (paper/facts.json) and their macros (paper/facts.tex) only")
	return func() bool { return fs.NArg() == 0 && (!*pdf || *check != "") && !(*facts && *check != "") }, func(ctx context.Context, log *slog.Logger) error {
		return schedcmd.Writeup(ctx, cfg, schedcmd.WriteupOptions{RunDir: *runDir, Facts: *facts, Check: *check, PDF: *pdf, Log: log})
	}
}
