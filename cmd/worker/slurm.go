package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/worker"
)

// slurmJob is what a worker takes from the Slurm job it runs in: the
// allocation (CPUs, GPUs: zero when not under Slurm) and its walltime's end
// (zero when unknown).
type slurmJob struct {
	worker.SlurmAllocation
	Deadline time.Time
	// Hosts of a multi-node allocation; MultiNodeRefusal why its tasks
	// cannot span them.
	Hosts            []string
	MultiNodeRefusal string
}

// fromSlurm reads the Slurm job the worker runs in, if any, and points
// the workspaces, logs and spool to a node-local directory unless they
// were configured: never the job's submit directory.
func fromSlurm(ctx context.Context, cfg *config.Worker, fs *flag.FlagSet, log *slog.Logger) (slurmJob, error) {
	alloc, ok, err := worker.SlurmFromEnv(os.Getenv)
	if err != nil || !ok {
		return slurmJob{}, err
	}
	job := slurmJob{SlurmAllocation: alloc}
	if job.Deadline, err = worker.SlurmDeadline(ctx, alloc.JobID); err != nil {
		log.Warn("walltime of the Slurm job unknown: tasks are not checked against it", "job_id", alloc.JobID, "err", err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	local := worker.NodeLocalDir(os.Getenv, currentUser())
	_, workSet := os.LookupEnv("HPCQ_WORK_DIR")
	workSet = workSet || set["work-dir"]
	if !workSet {
		cfg.WorkDir = filepath.Join(local, "work")
	}
	if alloc.Nodes > 1 {
		// The ranks on the other nodes run in the task's workspace: it must
		// be where they see it, a directory the user chose.
		if job.Hosts, err = worker.SlurmHosts(ctx, alloc.NodeList); err != nil {
			return job, err
		}
		if !workSet {
			job.MultiNodeRefusal = "its workspaces are on node-local disk (" + cfg.WorkDir + "): set HPCQ_WORK_DIR to a file system every node of the allocation sees"
		}
	}
	if _, env := os.LookupEnv("HPCQ_SPOOL_DIR"); !env {
		cfg.Store.SpoolDir = filepath.Join(local, "spool")
	}
	log.Info("running as a Slurm job", "job_id", alloc.JobID, "cpus", alloc.CPUs, "gpus", alloc.GPUs, "hosts", job.Hosts, "ends", job.Deadline,
		"work_dir", cfg.WorkDir, "spool_dir", cfg.Store.SpoolDir)
	return job, nil
}

// currentUser is the name of the worker's user, for its node-local
// directory.
func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return strconv.Itoa(os.Getuid())
}
