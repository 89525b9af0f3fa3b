package executor

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/schema"
)

// mpsDir is a directory as nvidia-cuda-mps-control -d leaves it: its
// control pipe (a FIFO), world-traversable as /tmp/nvidia-mps is.
func mpsDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "nvidia-mps")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, unix.Mkfifo(filepath.Join(dir, "control"), 0o666))
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		require.NoError(t, os.Chmod(d, 0o755))
	}
	return dir
}

// TestGPUShareUnderMPS: a task holding a quarter of a GPU on a worker that
// found the site's MPS daemon is told the pipe directory (which it sees
// through its sandbox's private /tmp) and its share of the multiprocessors;
// the result says how the GPU was shared.
func TestGPUShareUnderMPS(t *testing.T) {
	dir := mpsDir(t)
	t.Setenv("HOME", t.TempDir())
	t.Setenv("CUDA_MPS_PIPE_DIRECTORY", dir)
	e, err := NewExecutor(Config{RunsDir: t.TempDir(), KillGrace: 200 * time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, dir, e.mps, "auto: found through CUDA_MPS_PIPE_DIRECTORY")
	task := cTask("mps")
	task.Artifacts.Compile.Commands = nil
	task.Artifacts.Run = schema.RunPhase{Commands: []string{
		`echo "cuda=$CUDA_VISIBLE_DEVICES pipe=$CUDA_MPS_PIPE_DIRECTORY pct=$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"`,
		`test -p "$CUDA_MPS_PIPE_DIRECTORY/control" && echo "control pipe seen"`}}
	res, err := e.Execute(context.Background(), task, worker.Slot{Cores: 1, GPUs: []string{"0"}, GPUShare: 0.25})
	require.NoError(t, err)
	require.True(t, res.OK(), "%+v", res.Error)
	tail := res.Phases[len(res.Phases)-1].LogTail
	require.Contains(t, tail, "cuda=0 pipe="+dir+" pct=25")
	require.Contains(t, tail, "control pipe seen")
	require.Equal(t, []string{"0"}, res.Limits.GPUs)
	require.InDelta(t, 0.25, res.Limits.GPUShare, 1e-9)
	require.Equal(t, "mps", res.Limits.GPUSharing)

	// A whole GPU under MPS: the pipe, no percentage, nothing shared.
	res, err = e.Execute(context.Background(), withAttempt(task, 2), worker.Slot{Cores: 1, GPUs: []string{"0"}, GPUShare: 1})
	require.NoError(t, err)
	require.Contains(t, res.Phases[len(res.Phases)-1].LogTail, "cuda=0 pipe="+dir+" pct=\n")
	require.Zero(t, res.Limits.GPUShare)
	require.Empty(t, res.Limits.GPUSharing)
}

func withAttempt(t *schema.NodeTask, n int) *schema.NodeTask {
	c := *t
	c.Attempt = n
	return &c
}

// TestGPUShareTimeSliced: without MPS the tasks sharing a GPU are told only
// which one; the result says the share is counted, taking turns.
func TestGPUShareTimeSliced(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	e, err := NewExecutor(Config{RunsDir: t.TempDir(), KillGrace: 200 * time.Millisecond, GPUMPS: MPSOff})
	require.NoError(t, err)
	task := cTask("ts")
	task.Artifacts.Compile.Commands = nil
	task.Artifacts.Run = schema.RunPhase{Commands: []string{`env | grep -c '^CUDA_MPS' || true`, `echo "cuda=$CUDA_VISIBLE_DEVICES"`}}
	res, err := e.Execute(context.Background(), task, worker.Slot{Cores: 1, GPUs: []string{"GPU-1"}, GPUShare: 0.5})
	require.NoError(t, err)
	tail := res.Phases[len(res.Phases)-1].LogTail
	require.Contains(t, tail, "|| true\n0\n", "no MPS variable")
	require.Contains(t, tail, "cuda=GPU-1")
	require.Equal(t, "time-slicing", res.Limits.GPUSharing)
	require.InDelta(t, 0.5, res.Limits.GPUShare, 1e-9)
}

func TestMPSSetting(t *testing.T) {
	none := func(string) string { return "" }
	dir := mpsDir(t)
	got, err := mpsPipe(dir, none)
	require.NoError(t, err)
	require.Equal(t, dir, got)
	got, err = mpsPipe(MPSOff, func(string) string { return dir })
	require.NoError(t, err)
	require.Empty(t, got, "off wins over the environment")
	got, err = mpsPipe(MPSAuto, func(string) string { return t.TempDir() })
	require.NoError(t, err)
	require.Empty(t, got, "auto: no control pipe, no MPS")

	_, err = mpsPipe("nvidia-mps", none)
	require.ErrorContains(t, err, `HPCQ_GPU_MPS "nvidia-mps": auto, off or the absolute path`)
	empty := t.TempDir()
	_, err = mpsPipe(empty, none)
	require.ErrorContains(t, err, "no MPS control pipe there")
	require.NoError(t, os.WriteFile(filepath.Join(empty, "control"), nil, 0o644))
	_, err = mpsPipe(empty, none)
	require.ErrorContains(t, err, "no MPS control pipe there", "a regular file is not the daemon's pipe")
}

// TestNodeLost: a multi-node run whose launcher says it lost a node is the
// allocation's fault; a launch that failed for the program's own reasons,
// or a task of one node, is the task's.
func TestNodeLost(t *testing.T) {
	two := worker.Slot{MPI: &worker.MPIShape{Hosts: []string{"c1", "c2"}, RanksPerNode: 2}}
	failed := func(tail string) *schema.NodeResult {
		return &schema.NodeResult{Error: &schema.ResultError{Phase: schema.PhaseRun, Kind: schema.ErrKindRunFailed, Message: "x"},
			Phases: []schema.PhaseResult{{Name: schema.PhaseRun, LogTail: tail}}}
	}
	lost := failed("$ $HPCQ_MPIRUN ./prog\nORTE has lost communication with a remote daemon.\n\n  HNP daemon : ...\n")
	require.Equal(t, "the run's launcher lost a node of the allocation (c1, c2): ORTE has lost communication with a remote daemon.", nodeLost(two, lost))
	require.Contains(t, nodeLost(two, failed("srun: error: Node failure on c2\n")), "Node failure on c2")
	require.Empty(t, nodeLost(two, failed("srun: error: Task launch for StepId=7.0 failed on node c2: No such file or directory\n")))
	require.Empty(t, nodeLost(worker.Slot{}, lost), "a task of one node")
	require.Empty(t, nodeLost(two, &schema.NodeResult{}), "a run that did not fail")
}
