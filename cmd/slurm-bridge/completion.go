package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/hpcq/hpcq/internal/cli"
)

// completion prints the shell's completion script of slurm-bridge.
func completion(args []string) error {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: slurm-bridge completion bash|zsh|fish")
		return exitError(2)
	}
	names := func(extra func(*flag.FlagSet)) []string {
		fs := flags("", "", &settings{})
		if extra != nil {
			extra(fs)
		}
		return cli.FlagNames(fs)
	}
	script, err := cli.Completion(args[0], "slurm-bridge", map[string][]string{
		"":       names(func(fs *flag.FlagSet) { fs.Bool("cancel-running", false, ""); fs.String("metrics-addr", "", "") }),
		"status": names(func(fs *flag.FlagSet) { fs.Bool("json", false, ""); fs.Bool("clear-stale", false, "") }),
		"resume": names(nil),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "slurm-bridge completion:", err)
		return exitError(2)
	}
	fmt.Print(script)
	return nil
}
