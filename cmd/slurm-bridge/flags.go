package main

import (
	"flag"
	"fmt"

	"github.com/hpcq/hpcq/internal/config"
)

// flags are a command's flags, and its usage: the commands, the flags, the
// environment.
func flags(name, args string, s *settings) *flag.FlagSet {
	fs := flag.NewFlagSet("slurm-bridge "+name, flag.ContinueOnError)
	config.AddCommonFlags(fs, &s.Common)
	fs.StringVar(&s.Config, "config", s.Config, config.Help(s, &s.Config, "bridge.yaml"))
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: slurm-bridge %s[flags] %s\n", name, args)
		if name == "" {
			fmt.Fprintf(fs.Output(), "\nCommands:\n  (none)   run the bridge\n  status   per pool backlog, workers, jobs, paused, last error (slurm-bridge status -h)\n"+
				"  resume   resume a paused queue of the running bridge (slurm-bridge resume -h)\n  completion  a shell's completion script\n")
		}
		fmt.Fprintf(fs.Output(), "\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), "\nEnvironment:\n")
		config.Usage(fs.Output(), s)
		fmt.Fprintf(fs.Output(), "  HPCQ_BRIDGE_<POOL>_<FIELD> overrides a queue's partition, account, qos, time_limit, max_jobs, backlog, slots or nodes\n"+
			"  HPCQ_BRIDGE_WORKER_BIN, HPCQ_BRIDGE_LOG_DIR, HPCQ_BRIDGE_NAME, HPCQ_BRIDGE_SERVER_GONE_EXIT override bridge.yaml's worker_bin, log_dir, name, server_gone_exit\n")
	}
	return fs
}
