package main

import (
	"strings"

	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/pkg/scheduler"
)

func cmdLs(args []string) error {
	var cfg config.Scheduler
	if err := config.Load(&cfg); err != nil {
		return err
	}
	fs := newFlags("ls", &cfg, "")
	runDir := fs.String("run-dir", "", "the run (default: the newest under --runs-dir)")
	asJSON := fs.Bool("json", false, "one JSON object per node")
	log, err := start(fs, &cfg, args, func() bool { return fs.NArg() == 0 })
	if err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	return scheduler.Ls(ctx, &cfg, scheduler.LsOptions{RunDir: *runDir, JSON: *asJSON, Log: log})
}

func cmdLogs(args []string) error {
	var cfg config.Scheduler
	if err := config.Load(&cfg); err != nil {
		return err
	}
	fs := newFlags("logs", &cfg, "NODE")
	runDir := fs.String("run-dir", "", "the run (default: the newest under --runs-dir)")
	phase := fs.String("phase", "", "download, compile or run (default: every phase that ran)")
	attempt := fs.Int("attempt", 0, "the attempt (default: the node's last)")
	follow := fs.Bool("follow", false, "on a running node: print its output as it comes, until it ends")
	fs.BoolVar(follow, "f", false, "short for --follow")
	log, err := start(fs, &cfg, args, func() bool { return fs.NArg() == 1 })
	if err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	return scheduler.Logs(ctx, &cfg, scheduler.LogsOptions{RunDir: *runDir, Node: fs.Arg(0), Phase: *phase, Attempt: *attempt,
		Follow: *follow, Log: log})
}

func cmdCancel(args []string) error {
	var cfg config.Scheduler
	if err := config.Load(&cfg); err != nil {
		return err
	}
	fs := newFlags("cancel", &cfg, "[NODE...]")
	runDir := fs.String("run-dir", "", "the run (default: the newest under --runs-dir)")
	reason := fs.String("reason", "", "why, recorded with the cancel")
	log, err := start(fs, &cfg, args, func() bool { return true })
	if err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	return scheduler.Cancel(ctx, &cfg, scheduler.CancelOptions{RunDir: *runDir, Nodes: fs.Args(), Reason: strings.TrimSpace(*reason), Log: log})
}

func cmdPurge(args []string) error {
	var cfg config.Scheduler
	if err := config.Load(&cfg); err != nil {
		return err
	}
	fs := newFlags("purge", &cfg, "")
	runDir := fs.String("run-dir", "", "the run (default: the newest under --runs-dir)")
	log, err := start(fs, &cfg, args, func() bool { return fs.NArg() == 0 })
	if err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	return scheduler.Purge(ctx, &cfg, scheduler.PurgeOptions{RunDir: *runDir, Log: log})
}
