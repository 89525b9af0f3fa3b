package main

import (
	"flag"

	"github.com/hpcq/hpcq/internal/cli"
)

// completion prints the shell's completion script of slurm-bridge.
func completion(args []string) error {
	names := func(extra func(*flag.FlagSet)) []string {
		fs := flags("", "", &settings{})
		if extra != nil {
			extra(fs)
		}
		return cli.FlagNames(fs)
	}
	return cli.PrintCompletion("slurm-bridge", args, map[string][]string{
		"":       names(runFlags(new(runOptions))),
		"status": names(statusFlags(new(statusOptions))),
		"resume": names(nil),
	})
}
