// Command worker pulls hpcq tasks from NATS JetStream and runs them.
//
//	worker [--pools cpu,gpu] [--slots N] [--work-dir DIR] [--idle-exit DURATION]
//
//	worker probe    # the toolchains and GPUs it would register, as JSON
//
// It needs HPCQ_NATS_URL (or --nats-url). SIGTERM or SIGINT drains it: it
// stops pulling, hands its running tasks back for another worker, and exits 0.
// A second signal during the drain ends it at once.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/hpcq/hpcq/internal/assemble"
	"github.com/hpcq/hpcq/internal/cli"
	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/executor"
	"github.com/hpcq/hpcq/internal/metrics"
	"github.com/hpcq/hpcq/internal/version"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/queue"
)

func main() { cli.Main("worker", run) }

func run(args []string) error {
	var cfg config.Worker
	if err := config.Load(&cfg); err != nil {
		return err
	}
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	config.AddCommonFlags(fs, &cfg.Common)
	fs.Var(config.ListFlag{P: &cfg.Pools}, "pools", config.Help(&cfg, &cfg.Pools, "comma-separated pools"))
	fs.IntVar(&cfg.Slots, "slots", cfg.Slots, config.Help(&cfg, &cfg.Slots, "tasks run at once, default: cores"))
	fs.StringVar(&cfg.WorkDir, "work-dir", cfg.WorkDir, config.Help(&cfg, &cfg.WorkDir, "workspaces and logs go under DIR/<run_id>/"))
	fs.StringVar(&cfg.ID, "id", cfg.ID, config.Help(&cfg, &cfg.ID, "registry id"))
	fs.DurationVar(&cfg.Grace, "kill-grace", cfg.Grace, config.Help(&cfg, &cfg.Grace, "SIGTERM to SIGKILL grace for commands"))
	fs.DurationVar(&cfg.IdleExit, "idle-exit", cfg.IdleExit, config.Help(&cfg, &cfg.IdleExit, "exit after this long with nothing to do, 0: never"))
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", cfg.MetricsAddr, config.Help(&cfg, &cfg.MetricsAddr, "serve Prometheus metrics at http://ADDR/metrics"))
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: worker [flags]\n       worker probe    (the toolchains and GPUs it would register, as JSON)\n\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), "\nEnvironment:\n")
		config.Usage(fs.Output(), &cfg)
	}
	if len(args) > 0 && args[0] == "completion" {
		return cli.PrintCompletion("worker", args[1:], map[string][]string{"": cli.FlagNames(fs)})
	}
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 1 && fs.Arg(0) == "probe" {
		return probe(context.Background(), &cfg)
	}
	if fs.NArg() > 0 {
		return cli.BadArgs(fs, fmt.Sprintf("unexpected arguments %q", fs.Args()))
	}
	if cfg.NATS.URL == "" {
		fmt.Fprintln(os.Stderr, "worker: no NATS server: set HPCQ_NATS_URL or --nats-url (a local run starts its workers itself: scheduler run --local)")
		return cli.ExitError(2)
	}
	log, err := cfg.Log.Logger(os.Stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// The first signal drains; a second one ends the process at once.
	go func() {
		<-ctx.Done()
		stop()
	}()

	return serve(ctx, &cfg, fs, log)
}

// serve connects, builds the worker from the settings and the machine (a
// Slurm allocation, the toolchains), and runs it until ctx ends.
func serve(ctx context.Context, cfg *config.Worker, fs *flag.FlagSet, log *slog.Logger) error {
	id := cfg.ID
	if id == "" {
		id = worker.DefaultID()
	}
	// A worker uses the streams as the scheduler declared them: its NATS user
	// needs no right to change them.
	opts := cfg.Queue.Options()
	opts.UseExisting = true
	q, err := queue.Dial(ctx, cfg.NATS.Conn("hpcq-worker "+id), opts, log)
	if err != nil {
		return err
	}
	defer q.Close()
	// Under Slurm the allocation sizes the worker: its CPUs, its GPUs, its
	// walltime, and its files go to a node-local directory.
	alloc, err := fromSlurm(ctx, cfg, fs, log)
	if err != nil {
		return err
	}
	wc := worker.ConfigFrom(cfg.Tasks, cfg.Pools)
	wc.ID, wc.Cores, wc.SlurmJobID, wc.Deadline = id, runtime.NumCPU(), alloc.JobID, alloc.Deadline
	if alloc.CPUs > 0 {
		wc.Cores = alloc.CPUs
	}
	if len(alloc.GPUs) > 0 {
		wc.GPUIDs = alloc.GPUs
	}
	wc.Hosts, wc.MultiNodeRefusal = alloc.Hosts, alloc.MultiNodeRefusal
	wc.Version, wc.Logger = version.Version, log
	// The login environment is captured once: toolchains are detected and
	// commands run in it (HPCQ_TASK_SHELL=login: a login shell per command).
	// The iterative installer asks the model through the scheduler's LLM
	// gateway.
	p := assemble.Params{Queue: q, Executor: executor.ConfigFrom(cfg.Tasks, cfg.WorkDir), Worker: wc, Installer: true, Logger: log}
	closeStores, err := workerStores(ctx, cfg, id, &p, log)
	defer closeStores()
	if err != nil {
		return err
	}
	exec, wc, err := assemble.Worker(ctx, p)
	if err != nil {
		return err
	}
	if cfg.MetricsAddr != "" {
		reg := metrics.NewRegistry()
		wc.Metrics = metrics.NewWorker(reg)
		if _, err := metrics.Serve(ctx, cfg.MetricsAddr, reg, log); err != nil {
			return err
		}
	}
	w, err := worker.New(q, exec, wc)
	if err != nil {
		return err
	}
	return w.Run(ctx)
}
