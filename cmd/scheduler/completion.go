package main

import (
	"github.com/hpcq/hpcq/internal/cli"
	"github.com/hpcq/hpcq/internal/config"
)

// completion prints the shell's completion script of the scheduler's
// commands and their flags.
func completion(args []string) error {
	flags := map[string][]string{}
	for name, c := range commands {
		var cfg config.Scheduler
		fs := newFlags(name, &cfg, c.args)
		c.define(fs, &cfg)
		flags[name] = cli.FlagNames(fs)
	}
	return cli.PrintCompletion("scheduler", args, flags)
}
