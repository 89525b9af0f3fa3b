// Package bridge is slurm-bridge: it starts hpcq workers as Slurm jobs
// when the queue backs up. One allocation queue per pool (bridge.yaml)
// says how a pool's workers are allocated; every Interval the bridge reads
// each pool's backlog and live workers from NATS and its own jobs with one
// squeue call, and submits the jobs the backlog needs within max_jobs and
// backlog. Its jobs carry its name and comment, and it counts and cancels
// only those. Its state lives in the HPCQ_BRIDGE key-value bucket, so a
// restarted bridge re-adopts the jobs still running. Queues are checked
// with sbatch --test-only at start and paused after repeated failures
// until a reload or a resume request.
package bridge
