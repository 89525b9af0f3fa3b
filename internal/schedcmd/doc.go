// Package schedcmd is the scheduler program: the commands of
// `bin/scheduler` (run, exec, status, query, export) as functions of their
// settings and options, with the wiring they share (the stores, the model,
// local mode, the run directory). cmd/scheduler parses flags and calls
// them.
package schedcmd

import "github.com/hpcq/hpcq/internal/cli"

// exitError carries an exit status without a message of its own.
type exitError = cli.ExitError
