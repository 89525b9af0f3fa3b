package worker_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/worker"
)

func TestSlurmFromEnv(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	_, ok, err := worker.SlurmFromEnv(env(nil))
	require.NoError(t, err)
	require.False(t, ok)

	a, ok, err := worker.SlurmFromEnv(env(map[string]string{"SLURM_JOB_ID": "42", "SLURM_CPUS_PER_TASK": "8", "SLURM_JOB_GPUS": "2,3"}))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, worker.SlurmAllocation{JobID: "42", CPUs: 8, GPUs: []string{"2", "3"}, Nodes: 1}, a)

	a, _, err = worker.SlurmFromEnv(env(map[string]string{"SLURM_JOB_ID": "7", "SLURM_JOB_CPUS_PER_NODE": "4(x2)", "CUDA_VISIBLE_DEVICES": "0", "SLURM_JOB_GPUS": "5"}))
	require.NoError(t, err)
	require.Equal(t, 4, a.CPUs)
	require.Equal(t, []string{"0"}, a.GPUs, "CUDA_VISIBLE_DEVICES as Slurm set it wins")

	a, _, err = worker.SlurmFromEnv(env(map[string]string{"SLURM_JOB_ID": "9", "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_NODELIST": "compute[1-2]"}))
	require.NoError(t, err)
	require.Equal(t, 2, a.Nodes)
	require.Equal(t, "compute[1-2]", a.NodeList, "expanded by scontrol (SlurmHosts) in the job")

	_, _, err = worker.SlurmFromEnv(env(map[string]string{"SLURM_JOB_ID": "7", "SLURM_CPUS_PER_TASK": "many"}))
	require.ErrorContains(t, err, "SLURM_CPUS_PER_TASK")
	_, _, err = worker.SlurmFromEnv(env(map[string]string{"SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "0"}))
	require.ErrorContains(t, err, "SLURM_JOB_NUM_NODES")
}

func TestParseSlurmTime(t *testing.T) {
	for _, s := range []string{"", "Unknown", "NONE\n"} {
		tm, err := worker.ParseSlurmTime(s)
		require.NoError(t, err)
		require.True(t, tm.IsZero())
	}
	tm, err := worker.ParseSlurmTime("2026-11-22T05:00:00\n")
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 11, 22, 5, 0, 0, 0, time.Local), tm)
	_, err = worker.ParseSlurmTime("tomorrow")
	require.Error(t, err)
}

func TestNodeLocalDir(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	require.Equal(t, "/scratch/job7/hpcq-ana", worker.NodeLocalDir(env(map[string]string{"SLURM_TMPDIR": "/scratch/job7", "TMPDIR": "/tmp/x"}), "ana"))
	require.Equal(t, "/tmp/x/hpcq-ana", worker.NodeLocalDir(env(map[string]string{"TMPDIR": "/tmp/x"}), "ana"))
	require.Equal(t, "/tmp/hpcq-ana", worker.NodeLocalDir(env(nil), "ana"))
	require.Equal(t, "/tmp/hpcq-ana", worker.NodeLocalDir(env(map[string]string{"TMPDIR": "relative"}), "ana"), "never a relative path")
	require.Equal(t, "/tmp/hpcq-_etc", worker.NodeLocalDir(env(nil), "/etc"))
	require.Equal(t, "/tmp/hpcq-unknown", worker.NodeLocalDir(env(nil), ""))
}
