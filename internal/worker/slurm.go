package worker

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// SlurmAllocation is what a worker running as a Slurm job reads from its
// environment.
type SlurmAllocation struct {
	JobID string
	// CPUs of the job step's task (SLURM_CPUS_PER_TASK, else the node's
	// share, SLURM_JOB_CPUS_PER_NODE); 0 when Slurm says nothing.
	CPUs int
	// GPUs are the device ids of the allocation (CUDA_VISIBLE_DEVICES, as
	// Slurm sets it with --gres, else SLURM_JOB_GPUS).
	GPUs []string
	// NodeList is the allocation's nodes as Slurm writes them
	// (SLURM_JOB_NODELIST: "compute[1-2]"), Nodes how many
	// (SLURM_JOB_NUM_NODES); SlurmHosts expands the list.
	NodeList string
	Nodes    int
}

// SlurmFromEnv reads the allocation; ok is false outside a Slurm job.
func SlurmFromEnv(getenv func(string) string) (a SlurmAllocation, ok bool, err error) {
	a.JobID = strings.TrimSpace(getenv("SLURM_JOB_ID"))
	if a.JobID == "" {
		return a, false, nil
	}
	if v := strings.TrimSpace(getenv("SLURM_CPUS_PER_TASK")); v != "" {
		if a.CPUs, err = strconv.Atoi(v); err != nil || a.CPUs < 1 {
			return a, true, fmt.Errorf("SLURM_CPUS_PER_TASK %q: not a positive number", v)
		}
	} else if v := strings.TrimSpace(getenv("SLURM_JOB_CPUS_PER_NODE")); v != "" {
		// "4", or "4(x2)" for several nodes with 4 each.
		first, _, _ := strings.Cut(v, "(")
		first, _, _ = strings.Cut(first, ",")
		if a.CPUs, err = strconv.Atoi(first); err != nil || a.CPUs < 1 {
			return a, true, fmt.Errorf("SLURM_JOB_CPUS_PER_NODE %q: not understood", v)
		}
	}
	a.NodeList = strings.TrimSpace(getenv("SLURM_JOB_NODELIST"))
	a.Nodes = 1
	if v := strings.TrimSpace(getenv("SLURM_JOB_NUM_NODES")); v != "" {
		if a.Nodes, err = strconv.Atoi(v); err != nil || a.Nodes < 1 {
			return a, true, fmt.Errorf("SLURM_JOB_NUM_NODES %q: not a positive number", v)
		}
	}
	gpus := strings.TrimSpace(getenv("CUDA_VISIBLE_DEVICES"))
	if gpus == "" {
		gpus = strings.TrimSpace(getenv("SLURM_JOB_GPUS"))
	}
	for _, g := range strings.Split(gpus, ",") {
		if g = strings.TrimSpace(g); g != "" {
			a.GPUs = append(a.GPUs, g)
		}
	}
	return a, true, nil
}

// SlurmHosts expands a Slurm node list ("compute[1-2],gpu07") into host
// names, in Slurm's order (the order of a job's ranks), with scontrol:
// Slurm's own hostlist syntax, not parsed here.
func SlurmHosts(ctx context.Context, nodeList string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "scontrol", "show", "hostnames", nodeList).Output()
	if err != nil {
		return nil, fmt.Errorf("scontrol show hostnames %s: %w", nodeList, err)
	}
	return strings.Fields(string(out)), nil
}

// SlurmDeadline asks Slurm when job ends (squeue's EndTime); zero when the
// job has no time limit.
func SlurmDeadline(ctx context.Context, jobID string) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "squeue", "-h", "-j", jobID, "-o", "%e").Output()
	if err != nil {
		return time.Time{}, fmt.Errorf("squeue -j %s: %w", jobID, err)
	}
	return ParseSlurmTime(string(out))
}

// ParseSlurmTime reads a Slurm timestamp (2026-11-22T05:00:00, local
// time); "Unknown", "NONE" and empty mean none.
func ParseSlurmTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "", "Unknown", "NONE", "N/A":
		return time.Time{}, nil
	}
	t, err := time.ParseInLocation("2006-01-02T15:04:05", s, time.Local)
	if err != nil {
		return time.Time{}, fmt.Errorf("slurm time %q: %w", s, err)
	}
	return t, nil
}

// NodeLocalDir is where a worker in a Slurm job keeps its workspaces, logs
// and spool when none is configured: a node-local directory per user
// ($SLURM_TMPDIR, else $TMPDIR, else /tmp, then hpcq-<user>), never the
// directory the job was submitted from, which is usually on a shared file
// system and shared by every worker of the job.
func NodeLocalDir(getenv func(string) string, user string) string {
	base := strings.TrimSpace(getenv("SLURM_TMPDIR"))
	if base == "" {
		base = strings.TrimSpace(getenv("TMPDIR"))
	}
	if base == "" || !filepath.IsAbs(base) {
		base = "/tmp"
	}
	if user == "" {
		user = "unknown"
	}
	return filepath.Join(base, "hpcq-"+strings.NewReplacer("/", "_", "..", "_").Replace(user))
}
