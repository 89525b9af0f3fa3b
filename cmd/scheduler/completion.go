package main

import (
	"fmt"
	"os"

	"github.com/hpcq/hpcq/internal/cli"
	"github.com/hpcq/hpcq/internal/config"
)

// completion prints the shell's completion script of the scheduler's
// commands and their flags.
func completion(args []string) error {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: scheduler completion bash|zsh|fish")
		return exitError(2)
	}
	flags := map[string][]string{}
	for name, c := range commands {
		var cfg config.Scheduler
		fs := newFlags(name, &cfg, c.args)
		c.define(fs, &cfg)
		flags[name] = cli.FlagNames(fs)
	}
	script, err := cli.Completion(args[0], "scheduler", flags)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scheduler completion:", err)
		return exitError(2)
	}
	fmt.Print(script)
	return nil
}
