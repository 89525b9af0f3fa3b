// Command scheduler owns hpcq runs.
//
//	scheduler run [--local] [--run-dir DIR] IDEA_DIR      the LLM-driven tree search
//	scheduler run [--local] --resume RUN_DIR              continue a run after a crash
//	scheduler exec [--local] [--workers N] TASK.json...   run hand-written tasks
//	scheduler status [--run-dir DIR]                      a run's nodes and best metric; pools, backlog, workers
//	scheduler query [--run-dir DIR] [--format F] "SQL"    query a run's results
//	scheduler export [--run-dir DIR]                      write a run's report, tree and memory export again
//	scheduler writeup [--run-dir DIR]                     the run's paper: every number checked, compiled (or --facts, --check PAPER.tex)
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
  writeup [--run-dir DIR]                                  the run's paper by the model around its facts, every number checked,
                                                           compiled in a task's sandbox (paper/paper.tex, paper.pdf, claims.json)
  writeup [--run-dir DIR] --facts | --check PAPER.tex [--pdf]
                                                           only the facts (paper/facts.json, facts.tex: \fact{ID}); or check a
                                                           paper's numbers and citations against them, no model (--pdf: compile it)
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
  image push FILE... | image ls                            put container images (SIF, SquashFS, OCI archives) in the cluster's object store,
                                                           for workers without a shared file system: run.yaml names one as store:sha256:...
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
	"run":     {"IDEA_DIR | --resume RUN_DIR", defineRun},
	"exec":    {"TASK.json...", defineExec},
	"status":  {"", defineStatus},
	"query":   {`"SQL"`, defineQuery},
	"export":  {"", defineExport},
	"ls":      {"", defineLs},
	"logs":    {"NODE", defineLogs},
	"cancel":  {"[NODE...]", defineCancel},
	"purge":   {"", definePurge},
	"serve":   {"", defineServe},
	"check":   {"IDEA_DIR", defineCheck},
	"image":   {"push FILE... | ls", defineImage},
	"writeup": {"", defineWriteup},
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
	fs.BoolVar(&term.Raw, "raw", false, "print programs' output and models' text as they are, escape sequences included (on a terminal they are made visible: ^[ for ESC)")
	fs.StringVar(&cfg.RunsDir, "runs-dir", cfg.RunsDir, config.Help(cfg, &cfg.RunsDir, "directory of run directories"))
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
