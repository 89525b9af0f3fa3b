// Command scheduler owns hpcq runs.
//
//	scheduler run [--local] [--run-dir DIR] IDEA_DIR      the LLM-driven tree search
//	scheduler run [--local] --resume RUN_DIR              continue a run after a crash
//	scheduler exec [--local] [--workers N] TASK.json...   run hand-written tasks
//	scheduler status [--run-dir DIR]                      a run's nodes and best metric; pools, backlog, workers
//	scheduler query [--run-dir DIR] [--format F] "SQL"    query a run's results
//	scheduler export [--run-dir DIR]                      write a run's report, tree and memory export again
//	scheduler ls [--run-dir DIR] [--json]                 a line per node: status, worker, Slurm job, time, metric
//	scheduler logs [--run-dir DIR] [--follow] NODE        a node's phase logs, or a running node's live output
//	scheduler cancel [--run-dir DIR] [NODE...]            stop a run (or nodes): queued tasks removed, running ones stopped
//	scheduler purge [--run-dir DIR] [--memory]            delete a run's tasks, results and artifacts from the server; its memory from Redis
//	scheduler check [--probe] IDEA_DIR                    validate an idea directory; print the resolved settings (--probe: ask the endpoint once)
//	scheduler serve [--http ADDR] [--run-dir DIR | --runs DIR]  the dashboard, JSON API and /metrics
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/hpcq/hpcq/internal/cli"
	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/term"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/scheduler"
)

const usage = `usage: scheduler <command> [flags] [args]

Commands:
  run [--local] [--workers N] [--slots N] [--run-dir DIR] IDEA_DIR   the tree search (IDEA_DIR: run.yaml, idea.md, resources.yaml?)
  run ... --enable_memgpt --memory_db FILE --memory_core_max_chars N --memory_recall_max_events N
          --memory_retrieval_k N --memory_max_compression_iterations N   the seed's memory flags (over HPCQ_MEMORY_*, over run.yaml)
  run ... --http ADDR                                      serve the live dashboard while the run goes (as serve does)
  run [--local] --resume RUN_DIR                           continue a run after a crash, kill -9 or interrupt
  exec [--local] [--workers N] [--slots N] TASK.json...   publish tasks, wait for their results, print a table
  status [--run-dir DIR]                                   a run's nodes and best metric; per pool pending / in flight / dead-lettered, workers
  query [--run-dir DIR] [--format table|csv|json] [--timeout D] "SQL"
                                                           one read-only SQL statement on a run's results (SQLite file or ClickHouse)
  export [--run-dir DIR]                                   write a run's report, tree.json/html and memory export again
  ls [--run-dir DIR] [--json]                              a line per node: stage, kind, status, attempt, worker, Slurm job, started, duration, metric
  logs [--run-dir DIR] [--phase P] [--attempt N] [--follow] NODE
                                                           a node's phase logs; a running node's output as it comes
  cancel [--run-dir DIR] [--reason TEXT] [NODE...]         stop the run (or the nodes): no new node, queued tasks removed, running ones stopped
  purge [--run-dir DIR] [--memory]                         delete a finished run's tasks, results and artifacts from the NATS server;
                                                           --memory: move its memory out of Redis into the run directory (ClickHouse keeps its rows)
  check [--probe] [memory flags] IDEA_DIR                  validate an idea directory and print the settings a run would use, and what it
                                                           sends to the model (starts nothing; --probe asks the endpoint once)
  serve [--http ADDR] [--run-dir DIR | --runs DIR]        the web dashboard, JSON API (/api/runs) and /metrics of finished or going runs
                                                           (default 127.0.0.1:8780; another address needs HPCQ_HTTP_TOKEN)
  completion bash|zsh|fish                                 the shell's completion script (e.g. source <(scheduler completion bash))

Run "scheduler <command> -h" for the flags of a command; "scheduler --version" prints the version.
`

// exitError carries an exit status without a message of its own.
type exitError = cli.ExitError

func main() { cli.Main("scheduler", route) }

// definer declares a command's flags and returns the check of its
// arguments and what it does.
type definer func(fs *flag.FlagSet, cfg *config.Scheduler) (argsOK func() bool, run func(ctx context.Context, log *slog.Logger) error)

// commands are the scheduler's commands: the arguments they take (for the
// usage line) and their definitions.
var commands = map[string]struct {
	args   string
	define definer
}{
	"run":    {"IDEA_DIR | --resume RUN_DIR", defineRun},
	"exec":   {"TASK.json...", defineExec},
	"status": {"", defineStatus},
	"query":  {`"SQL"`, defineQuery},
	"export": {"", defineExport},
	"ls":     {"", defineLs},
	"logs":   {"NODE", defineLogs},
	"cancel": {"[NODE...]", defineCancel},
	"purge":  {"", definePurge},
	"serve":  {"", defineServe},
	"check":  {"IDEA_DIR", defineCheck},
}

func route(args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return exitError(2)
	}
	if c, ok := commands[args[0]]; ok {
		return command(args[0], c.args, args[1:], c.define)
	}
	switch args[0] {
	case "completion":
		return completion(args[1:])
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

// start parses a command's flags, checks its arguments (usageOK; else the
// usage and exit status 2) and builds its logger.
func start(fs *flag.FlagSet, cfg *config.Scheduler, args []string, usageOK func() bool) (*slog.Logger, error) {
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	if !usageOK() {
		return nil, cli.BadArgs(fs, fmt.Sprintf("wrong arguments %q", fs.Args()))
	}
	var w io.Writer = os.Stderr
	if screen != nil {
		w = screen.Writer(os.Stderr)
	}
	return cfg.Log.Logger(w)
}

// screen is the terminal when stdout and stderr both are one: `run` draws
// its progress line there, and log records are written above it.
var screen = func() *term.Screen {
	if term.IsTerminal(os.Stdout) && term.IsTerminal(os.Stderr) {
		return term.New(os.Stdout)
	}
	return nil
}()

// command parses a subcommand's flags (define declares them and returns
// the check of its arguments and what it does), then runs it until it ends
// or SIGTERM/SIGINT.
func command(name, argsUsage string, args []string, define definer) error {
	var cfg config.Scheduler
	if err := config.Load(&cfg); err != nil {
		return err
	}
	fs := newFlags(name, &cfg, argsUsage)
	argsOK, run := define(fs, &cfg)
	log, err := start(fs, &cfg, args, argsOK)
	if err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	return run(ctx, log)
}

// runDirFlag is --run-dir of the commands about one run.
func runDirFlag(fs *flag.FlagSet) *string {
	return fs.String("run-dir", "", "the run (default: the newest under --runs-dir)")
}

func noArgs(fs *flag.FlagSet) func() bool { return func() bool { return fs.NArg() == 0 } }

func defineExec(fs *flag.FlagSet, cfg *config.Scheduler) (func() bool, func(context.Context, *slog.Logger) error) {
	local := fs.Bool("local", false, "start an embedded NATS server and in-process workers (default when no NATS URL is set)")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "in-process workers with --local (env HPCQ_LOCAL_WORKERS)")
	fs.IntVar(&cfg.Slots, "slots", cfg.Slots, "slots per in-process worker, default: cores (env HPCQ_SLOTS)")
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
		return scheduler.Exec(ctx, cfg, scheduler.ExecOptions{Local: *local, Pools: pools, Files: fs.Args(), JSON: *jsonOut, Log: log})
	}
}

func defineStatus(fs *flag.FlagSet, cfg *config.Scheduler) (func() bool, func(context.Context, *slog.Logger) error) {
	runDir := fs.String("run-dir", "", "run to inspect: its nodes and best metric, and its queue (default: the newest under --runs-dir when no NATS URL is set)")
	jsonOut := fs.Bool("json", false, "print JSON")
	return noArgs(fs), func(ctx context.Context, log *slog.Logger) error {
		return scheduler.Status(ctx, cfg, scheduler.StatusOptions{RunDir: *runDir, JSON: *jsonOut, Log: log})
	}
}

func defineQuery(fs *flag.FlagSet, cfg *config.Scheduler) (func() bool, func(context.Context, *slog.Logger) error) {
	runDir := fs.String("run-dir", "", "run whose results to query (default: ClickHouse if HPCQ_CLICKHOUSE_DSN is set, else the newest run under --runs-dir)")
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
		return scheduler.Query(ctx, cfg, scheduler.QueryOptions{RunDir: *runDir, SQL: fs.Arg(0), Format: *format, Timeout: *timeout})
	}
}

func defineRun(fs *flag.FlagSet, cfg *config.Scheduler) (func() bool, func(context.Context, *slog.Logger) error) {
	local := fs.Bool("local", false, "start an embedded NATS server and in-process workers (default when no NATS URL is set)")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "in-process workers with --local (env HPCQ_LOCAL_WORKERS)")
	fs.IntVar(&cfg.Slots, "slots", cfg.Slots, "slots per in-process worker, default: cores (env HPCQ_SLOTS)")
	runDir := fs.String("run-dir", "", "the run's directory (default: --runs-dir/<run id>)")
	resume := fs.String("resume", "", "continue the run in this directory after a crash or an interrupt")
	metricsAddr := fs.String("metrics-addr", "", "serve only Prometheus metrics at http://ADDR/metrics while the run goes (--http serves them too)")
	httpAddr := fs.String("http", "", "serve the live dashboard, the JSON API and /metrics at http://ADDR/ while the run goes (127.0.0.1:PORT; another address needs HPCQ_HTTP_TOKEN)")
	config.AddMemoryFlags(fs, &cfg.Memory)
	waitWorkers := fs.Duration("wait-workers", 0, "how long to wait at start for a live worker of the run's pool before the first nodes are published (default: no wait; workers slurm-bridge starts come when tasks wait, and the prompts describe the pool's toolchains once a worker registered)")
	argsOK := func() bool { return (*resume == "") == (fs.NArg() == 1) && (*resume == "" || fs.NArg() == 0) }
	return argsOK, func(ctx context.Context, log *slog.Logger) error {
		o := scheduler.RunOptions{Local: *local, IdeaDir: fs.Arg(0), RunDir: *runDir, Resume: *resume, WaitWorkers: *waitWorkers,
			MetricsAddr: *metricsAddr, HTTP: *httpAddr, Log: log, Abandon: secondInterrupt(ctx)}
		if screen != nil {
			o.Status = screen
		}
		return scheduler.Run(ctx, cfg, o)
	}
}

func defineExport(fs *flag.FlagSet, cfg *config.Scheduler) (func() bool, func(context.Context, *slog.Logger) error) {
	runDir := runDirFlag(fs)
	return noArgs(fs), func(ctx context.Context, log *slog.Logger) error {
		return scheduler.Export(ctx, cfg, scheduler.ExportOptions{RunDir: *runDir, Log: log})
	}
}
