package main

import (
	"context"
	"flag"
	"log/slog"
	"strings"

	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/schedcmd"
)

func defineLs(fs *flag.FlagSet, cfg *config.Scheduler) (func() bool, func(context.Context, *slog.Logger) error) {
	runDir := runDirFlag(fs)
	asJSON := fs.Bool("json", false, "one JSON object per node")
	return noArgs(fs), func(ctx context.Context, log *slog.Logger) error {
		return schedcmd.Ls(ctx, cfg, schedcmd.LsOptions{RunDir: *runDir, JSON: *asJSON, Log: log})
	}
}

func defineLogs(fs *flag.FlagSet, cfg *config.Scheduler) (func() bool, func(context.Context, *slog.Logger) error) {
	runDir := runDirFlag(fs)
	phase := fs.String("phase", "", "download, compile or run (default: every phase that ran)")
	attempt := fs.Int("attempt", 0, "the attempt (default: the node's last)")
	follow := fs.Bool("follow", false, "on a running node: print its output as it comes, until it ends")
	fs.BoolVar(follow, "f", false, "short for --follow")
	return func() bool { return fs.NArg() == 1 }, func(ctx context.Context, log *slog.Logger) error {
		return schedcmd.Logs(ctx, cfg, schedcmd.LogsOptions{RunDir: *runDir, Node: fs.Arg(0), Phase: *phase, Attempt: *attempt,
			Follow: *follow, Log: log})
	}
}

func defineCancel(fs *flag.FlagSet, cfg *config.Scheduler) (func() bool, func(context.Context, *slog.Logger) error) {
	runDir := runDirFlag(fs)
	reason := fs.String("reason", "", "why, recorded with the cancel")
	return func() bool { return true }, func(ctx context.Context, log *slog.Logger) error {
		return schedcmd.Cancel(ctx, cfg, schedcmd.CancelOptions{RunDir: *runDir, Nodes: fs.Args(), Reason: strings.TrimSpace(*reason), Log: log})
	}
}

func definePurge(fs *flag.FlagSet, cfg *config.Scheduler) (func() bool, func(context.Context, *slog.Logger) error) {
	runDir := runDirFlag(fs)
	mem := fs.Bool("memory", false, "also move the run's memory out of Redis into its run directory (an ended cluster run; ClickHouse keeps its rows)")
	return noArgs(fs), func(ctx context.Context, log *slog.Logger) error {
		return schedcmd.Purge(ctx, cfg, schedcmd.PurgeOptions{RunDir: *runDir, Memory: *mem, Log: log})
	}
}

func defineServe(fs *flag.FlagSet, cfg *config.Scheduler) (func() bool, func(context.Context, *slog.Logger) error) {
	addr := fs.String("http", schedcmd.DefaultHTTPAddr, "address of the dashboard, the JSON API and /metrics (another address than loopback needs HPCQ_HTTP_TOKEN)")
	runDir := fs.String("run-dir", "", "serve this run only")
	runs := fs.String("runs", "", "serve every run under this directory (default: --runs-dir)")
	return func() bool { return fs.NArg() == 0 && (*runDir == "" || *runs == "") }, func(ctx context.Context, log *slog.Logger) error {
		return schedcmd.Serve(ctx, cfg, schedcmd.ServeOptions{HTTP: *addr, RunDir: *runDir, Runs: *runs, Log: log})
	}
}

func defineCheck(fs *flag.FlagSet, cfg *config.Scheduler) (func() bool, func(context.Context, *slog.Logger) error) {
	config.AddMemoryFlags(fs, &cfg.Memory)
	probe := fs.Bool("probe", false, "send one tiny request (and with llm.vision, one tiny image) to the endpoint and print what it accepted, the model it reports and the latency")
	return func() bool { return fs.NArg() == 1 }, func(ctx context.Context, _ *slog.Logger) error {
		return schedcmd.Check(ctx, cfg, schedcmd.CheckOptions{IdeaDir: fs.Arg(0), Probe: *probe})
	}
}

func defineImage(fs *flag.FlagSet, cfg *config.Scheduler) (func() bool, func(context.Context, *slog.Logger) error) {
	return func() bool {
			return (fs.Arg(0) == "push" && fs.NArg() > 1) || (fs.Arg(0) == "ls" && fs.NArg() == 1)
		}, func(ctx context.Context, log *slog.Logger) error {
			return schedcmd.Image(ctx, cfg, schedcmd.ImageOptions{Action: fs.Arg(0), Files: fs.Args()[1:], Log: log})
		}
}
