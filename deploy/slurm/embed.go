// Package slurm holds the Slurm files of hpcq: the worker job template the
// bridge renders (embedded here so that the binary carries its default),
// and the scheduler and all-in-one batch scripts of deploy/slurm.
package slurm

import _ "embed"

// WorkerTemplate is worker.sbatch.tmpl.
//
//go:embed worker.sbatch.tmpl
var WorkerTemplate string
