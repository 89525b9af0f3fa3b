package worker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/schema"
)

// gpuTasks are tasks asking for these amounts of GPUs.
func gpuTasks(amounts ...float64) []*schema.NodeTask {
	ts := tasks(len(amounts))
	for i, a := range amounts {
		ts[i].Limits.GPUs = a
	}
	return ts
}

// TestGPUSharesPack: shares of a GPU go to the GPU the other shares use
// most that has room (best fit), so that a whole GPU stays free for the
// task that needs one; a share never goes over what is left of a device.
func TestGPUSharesPack(t *testing.T) {
	got, share := worker.GPUPlan([]string{"0", "1"}, gpuTasks(0.5, 0.25, 1, 0.25, 0.25, 1))
	require.Equal(t, [][]string{{"0"}, {"0"}, {"1"}, {"0"}, nil, nil}, got,
		"0.5 and 0.25 and 0.25 fill GPU 0; the whole task takes GPU 1; what is left waits")
	require.Equal(t, []float64{0.5, 0.25, 1, 0.25, 0, 0}, share)

	got, _ = worker.GPUPlan([]string{"0", "1", "2"}, gpuTasks(0.75, 0.5, 2))
	require.Equal(t, [][]string{{"0"}, {"1"}, nil}, got, "0.5 does not fit beside 0.75; two whole GPUs are not free")

	got, share = worker.GPUPlan([]string{"MIG-a", "MIG-b"}, gpuTasks(0.5, 0.5))
	require.Equal(t, [][]string{{"MIG-a"}, {"MIG-a"}}, got, "a MIG instance is shared as a GPU is")
	require.Equal(t, []float64{0.5, 0.5}, share)
}

// TestFractionalGPUsRunTogether: with one GPU, two tasks of 0.5 run at
// once on it (the same CUDA_VISIBLE_DEVICES, each told its share), and a
// task of 1 never runs beside either; the registry and the metrics count
// what they hold.
func TestFractionalGPUsRunTogether(t *testing.T) {
	q := testutil.StartNATS(t, "embedded").Queue(t, queue.Options{})
	var mu sync.Mutex
	var shares, wholes, peakShares int
	var overlapped bool
	both := make(chan struct{})
	var once sync.Once
	var w *worker.Worker
	var inUse []map[string]float64
	exec := worker.ExecutorFunc(func(_ context.Context, task *schema.NodeTask, s worker.Slot) (*schema.NodeResult, error) {
		require.Equal(t, []string{"3"}, s.GPUs)
		mu.Lock()
		if task.Limits.GPUs < 1 {
			require.InDelta(t, 0.5, s.GPUShare, 1e-9)
			shares++
			peakShares = max(peakShares, shares)
			if shares == 2 {
				once.Do(func() { close(both) })
			}
		} else {
			require.InDelta(t, 1, s.GPUShare, 1e-9)
			wholes++
		}
		overlapped = overlapped || wholes > 0 && shares > 0 || wholes > 1
		inUse = append(inUse, w.GPUsInUse())
		mu.Unlock()
		if task.Limits.GPUs < 1 {
			select { // the two shares run together, or the test fails below
			case <-both:
			case <-time.After(10 * time.Second):
			}
		} else {
			time.Sleep(100 * time.Millisecond) //nolint:forbidigo // the whole GPU is held a while
		}
		mu.Lock()
		if task.Limits.GPUs < 1 {
			shares--
		} else {
			wholes--
		}
		mu.Unlock()
		return okResult(), nil
	})
	b := startWorker(t, q, exec, worker.Config{Slots: 3, Cores: 3, GPUIDs: []string{"3"}, RequeueDelay: 50 * time.Millisecond})
	w = b.w
	outs := execAll(t, q, gpuTasks(0.5, 1, 0.5))
	for _, o := range outs {
		require.True(t, o.OK(), "%+v", o)
	}
	require.Equal(t, 2, peakShares, "the two halves of the GPU ran at once")
	require.False(t, overlapped, "the whole-GPU task ran beside another")
	for _, m := range inUse {
		require.Contains(t, []float64{0.5, 1}, m["cpu"], "what the pool's tasks hold: %v", inUse)
	}
	require.Empty(t, w.GPUsInUse(), "every share given back")
}

// TestTooManyGPUsDeclined: a task asking for more GPUs than the worker has
// is declined with the amount it asked.
func TestTooManyGPUsDeclined(t *testing.T) {
	q := testutil.StartNATS(t, "embedded").Queue(t, queue.Options{})
	startWorker(t, q, worker.ExecutorFunc(func(context.Context, *schema.NodeTask, worker.Slot) (*schema.NodeResult, error) {
		return okResult(), nil
	}), worker.Config{Slots: 1, Cores: 1, GPUIDs: []string{"0"}})
	outs := execAll(t, q, gpuTasks(2))
	require.NotNil(t, outs[0].DeadLetter)
	require.Contains(t, outs[0].DeadLetter.Reason, "it needs 2 GPUs (limits.gpus) and the worker has 1")
}

// TestMPILaunch: the launch prefix of a task's ranks for each MPI a worker
// may have.
func TestMPILaunch(t *testing.T) {
	hosts := []string{"compute1", "compute2"}
	require.Equal(t, "mpirun -np 4 --host compute1:2,compute2:2 --bind-to none --tag-output", worker.MPILaunch("Open MPI 4.1.4", hosts, 2, 1))
	require.Equal(t, "mpirun -np 2 --host compute1:1,compute2:1 --map-by ppr:1:node:pe=4 --bind-to core --tag-output",
		worker.MPILaunch("Open MPI 5.0.3", hosts, 1, 4))
	require.Equal(t, "mpiexec -n 4 -ppn 2 -hosts compute1,compute2 -prepend-rank", worker.MPILaunch("MPICH 4.0", hosts, 2, 1))
	require.Equal(t, "srun --nodes=2 --ntasks-per-node=2 --cpus-per-task=1 --nodelist=compute1,compute2 --kill-on-bad-exit=1 --label",
		worker.MPILaunch("", hosts, 2, 0))
}

// TestMultiNodeTaskDeclined: a worker of one node declines a task of two
// with the reason (no live worker has the nodes: dead-lettered); one whose
// allocation has them but cannot launch there says why; a single-node
// task that names its ranks gets a launch on its own host.
func TestMultiNodeTaskDeclined(t *testing.T) {
	q := testutil.StartNATS(t, "embedded").Queue(t, queue.Options{})
	var slots []worker.Slot
	var mu sync.Mutex
	exec := worker.ExecutorFunc(func(_ context.Context, _ *schema.NodeTask, s worker.Slot) (*schema.NodeResult, error) {
		mu.Lock()
		slots = append(slots, s)
		mu.Unlock()
		return okResult(), nil
	})
	b := startWorker(t, q, exec, worker.Config{Slots: 1, Cores: 2, Toolchains: map[string]string{"mpi": "Open MPI 4.1.4"}})
	ts := tasks(2)
	ts[0].Limits.Nodes, ts[0].Limits.RanksPerNode = 2, 2
	ts[1].Limits.RanksPerNode = 2
	outs := execAll(t, q, ts)
	require.NotNil(t, outs[0].DeadLetter)
	require.Contains(t, outs[0].DeadLetter.Reason, "declined: it needs 2 nodes (limits.nodes) and the worker's allocation has 1")
	require.True(t, outs[1].OK())
	require.Len(t, slots, 1)
	require.NotNil(t, slots[0].MPI)
	require.Equal(t, 2, slots[0].MPI.Ranks())
	require.Contains(t, slots[0].MPI.Launch, "mpirun -np 2 --host ")
	b.stop(t)

	q2 := testutil.StartNATS(t, "embedded").Queue(t, queue.Options{})
	startWorker(t, q2, exec, worker.Config{Slots: 1, Cores: 2, Hosts: []string{"c1", "c2"},
		MultiNodeRefusal: "its workspaces are on node-local disk"})
	ts = tasks(1)
	ts[0].Limits.Nodes = 2
	outs = execAll(t, q2, ts)
	require.NotNil(t, outs[0].DeadLetter)
	require.Contains(t, outs[0].DeadLetter.Reason, "declined: its workspaces are on node-local disk")
}
