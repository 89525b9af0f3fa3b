// Command slurm-bridge starts hpcq workers as Slurm jobs when the queue
// backs up.
//
//	slurm-bridge [--config bridge.yaml] [--cancel-running]   run the bridge
//	slurm-bridge status [--config bridge.yaml] [--json]      per pool backlog, workers, jobs, paused, last error
//	slurm-bridge resume [--config bridge.yaml] POOL          resume a paused queue of the running bridge
//
// SIGHUP reloads the configuration (and resumes paused queues); SIGTERM or
// SIGINT stops the bridge, cancelling its pending jobs (and its running ones
// with --cancel-running), never anyone else's. The NATS server away longer
// than server_gone_exit stops it too, cancelling its running jobs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hpcq/hpcq/internal/bridge"
	"github.com/hpcq/hpcq/internal/cli"
	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/metrics"
	"github.com/hpcq/hpcq/pkg/queue"
)

func main() { cli.Main("slurm-bridge", dispatch) }

func dispatch(args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "status":
			return cmdStatus(args[1:])
		case "resume":
			return cmdResume(args[1:])
		case "completion":
			return completion(args[1:])
		}
	}
	return cmdRun(args)
}

type settings struct {
	config.Common
	Config string `envconfig:"BRIDGE_CONFIG" default:"bridge.yaml" desc:"the bridge's configuration file"`
}

func parse(fs *flag.FlagSet, args []string) error { return cli.Parse(fs, args) }

func setup(args []string, name, usage string, extra func(*flag.FlagSet)) (*settings, *flag.FlagSet, error) {
	var s settings
	if err := config.Load(&s); err != nil {
		return nil, nil, err
	}
	fs := flags(name, usage, &s)
	if extra != nil {
		extra(fs)
	}
	if err := parse(fs, args); err != nil {
		return nil, nil, err
	}
	if s.NATS.URL == "" {
		return nil, nil, errors.New("HPCQ_NATS_URL (or --nats-url) is required: the bridge watches the cluster's queue")
	}
	return &s, fs, nil
}

// runOptions are the flags of the bridge's run beside the common ones.
type runOptions struct {
	cancelRunning bool
	metricsAddr   string
}

func runFlags(o *runOptions) func(*flag.FlagSet) {
	return func(fs *flag.FlagSet) {
		fs.BoolVar(&o.cancelRunning, "cancel-running", false, "at shutdown cancel the bridge's running jobs too (default: only pending ones)")
		fs.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics")
	}
}

func cmdRun(args []string) error {
	var o runOptions
	s, fs, err := setup(args, "", "", runFlags(&o))
	if err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return cli.BadArgs(fs, fmt.Sprintf("unexpected arguments %q", fs.Args()))
	}
	log, err := s.Log.Logger(os.Stderr)
	if err != nil {
		return err
	}
	cfg, err := bridge.LoadConfig(s.Config, os.Getenv)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	opts := s.Queue.Options()
	opts.UseExisting = true // see the worker's
	q, err := queue.Dial(ctx, s.NATS.Conn("hpcq-slurm-bridge"), opts, log)
	if err != nil {
		return err
	}
	defer q.Close()
	b, err := bridge.New(ctx, q, cfg, log)
	if err != nil {
		return err
	}
	if o.metricsAddr != "" {
		reg := metrics.NewRegistry()
		b.Metrics = metrics.NewBridge(reg)
		if _, err := metrics.Serve(ctx, o.metricsAddr, reg, log); err != nil {
			return err
		}
	}
	if err := b.DryRun(ctx); err != nil {
		log.Error("dry run", "err", err) // the failing queues are paused; the others run
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for range hup {
			cfg, err := bridge.LoadConfig(s.Config, os.Getenv)
			if err != nil {
				log.Error("reload refused: the configuration stays as it was", "err", err)
				continue
			}
			if err := b.Reload(ctx, cfg); err != nil {
				log.Error("reload", "err", err)
			}
		}
	}()
	log.Info("bridge started", "pools", cfg.Pools(), "interval", cfg.Interval)
	runErr := b.Run(ctx)
	cancelRunning := o.cancelRunning
	if errors.Is(runErr, bridge.ErrServerGone) {
		// The end of a split deployment: the scheduler's job and its server
		// ended. Its worker jobs have nothing left to serve.
		log.Info("the NATS server is gone: the bridge stops and cancels its jobs", "why", runErr)
		cancelRunning, runErr = true, nil
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.Shutdown(sctx, cancelRunning); err != nil {
		log.Error("shutdown: jobs not cancelled", "err", err)
		return errors.Join(runErr, err)
	}
	log.Info("bridge stopped")
	return runErr
}

func cmdResume(args []string) error {
	s, fs, err := setup(args, "resume ", "POOL", nil)
	if err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return cli.BadArgs(fs, fmt.Sprintf("wrong arguments %q", fs.Args()))
	}
	cfg, err := bridge.LoadConfig(s.Config, os.Getenv)
	if err != nil {
		return err
	}
	pool := fs.Arg(0)
	if _, ok := cfg.Queues[pool]; !ok {
		return fmt.Errorf("pool %q has no queue in %s", pool, s.Config)
	}
	log, err := s.Log.Logger(os.Stderr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q, err := queue.Dial(ctx, s.NATS.Conn("hpcq-slurm-bridge-resume"), s.Queue.Options(), log)
	if err != nil {
		return err
	}
	defer q.Close()
	if err := bridge.Resume(ctx, q, cfg.Name, pool); err != nil {
		return err
	}
	fmt.Printf("resume of %s asked; the bridge takes it at its next look (every %v)\n", pool, cfg.Interval)
	return nil
}
