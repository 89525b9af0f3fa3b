package worker_test

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/executor"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/schema"
)

func realExec(t *testing.T) *executor.Executor {
	t.Helper()
	e, err := executor.NewExecutor(executor.Config{RunsDir: t.TempDir(), KillGrace: 200 * time.Millisecond, Env: testutil.ShellEnv(t)})
	require.NoError(t, err)
	return e
}

// TestTasksGetDisjointCPUs: two tasks running at once are bound to CPU
// sets of their own, as /proc shows them, with OMP_NUM_THREADS to match.
func TestTasksGetDisjointCPUs(t *testing.T) {
	cpus, err := worker.AffinityCPUs()
	require.NoError(t, err)
	if len(cpus) < 2 {
		t.Skipf("this machine lets the test run on %d CPU: two disjoint sets need 2", len(cpus))
	}
	q := testutil.StartNATS(t, "embedded").Queue(t, queue.Options{})
	startWorker(t, q, realExec(t), worker.Config{Slots: 2, Cores: 2})
	ts := tasks(2)
	for _, task := range ts {
		task.Limits.CPUs = 1
		// Both run at once (two slots), each on its own CPU.
		task.Artifacts.Run.Commands = []string{`grep Cpus_allowed_list /proc/self/status; echo "omp=$OMP_NUM_THREADS"; sleep 1`}
	}
	outs := execAll(t, q, ts)
	seen := map[string]bool{}
	for _, o := range outs {
		require.True(t, o.OK(), "%+v", o.Result)
		tail := o.Result.Phases[len(o.Result.Phases)-1].LogTail
		require.Contains(t, tail, "omp=1")
		var list string
		for _, line := range strings.Split(tail, "\n") {
			if rest, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				list = strings.TrimSpace(rest)
			}
		}
		require.NotEmpty(t, list, tail)
		require.Equal(t, list, o.Result.Limits.CPUs, "the result says which CPUs")
		require.False(t, seen[list], "CPU %s given to two tasks", list)
		seen[list] = true
	}
}

// TestMemoryHogStopped: a task over its memory limit fails with a reason
// that names the limit and how it was enforced.
func TestMemoryHogStopped(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not found: this test compiles C code")
	}
	q := testutil.StartNATS(t, "embedded").Queue(t, queue.Options{})
	startWorker(t, q, realExec(t), worker.Config{Slots: 1})
	hog := &schema.NodeTask{V: 1, NodeID: "hog", Attempt: 1, Pool: "cpu", Limits: schema.Limits{MemoryMB: 64},
		Artifacts: schema.Artifacts{
			Coding: schema.CodingPhase{Workspace: schema.Workspace{Files: []schema.File{{Path: "hog.c", Content: `#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void) {
  size_t n = 512u << 20;
  char *p = malloc(n);
  if (!p) { perror("malloc"); return 3; }
  memset(p, 1, n);
  printf("allocated %zu\n", n);
  return 0;
}
`}}}},
			Compile: schema.CommandsPhase{Commands: []string{"gcc -O0 -o hog hog.c"}},
			Run:     schema.RunPhase{Commands: []string{"./hog"}},
		}}
	outs := execAll(t, q, []*schema.NodeTask{hog})
	r := outs[0].Result
	require.NotNil(t, r)
	require.NotNil(t, r.Error, "the hog must not get its 512 MB")
	require.Equal(t, schema.ErrKindRunFailed, r.Error.Kind)
	require.Contains(t, r.Error.Message, "memory limit (limits.memory_mb = 64 MB")
	require.NotNil(t, r.Limits)
	require.Contains(t, []string{"cgroup", "cgroup-v1", "rlimit"}, r.Limits.Memory)
	require.Equal(t, 64, r.Limits.MemoryMB)
}

// TestOversizeTaskDeclined: a task asking more CPUs than any worker of the
// pool has is dead-lettered with that reason, not run.
func TestOversizeTaskDeclined(t *testing.T) {
	q := testutil.StartNATS(t, "embedded").Queue(t, queue.Options{})
	var ran atomic.Int64
	exec := worker.ExecutorFunc(func(context.Context, *schema.NodeTask, worker.Slot) (*schema.NodeResult, error) {
		ran.Add(1)
		return okResult(), nil
	})
	startWorker(t, q, exec, worker.Config{Slots: 2, Cores: 2})
	big := tasks(1)
	big[0].Limits.CPUs = 64
	outs := execAll(t, q, big)
	require.NotNil(t, outs[0].DeadLetter)
	require.Contains(t, outs[0].DeadLetter.Reason, "declined: it needs 64 CPUs (limits.cpus) and the worker has 2")
	require.Zero(t, ran.Load())
}

// TestGPUsNeverShared: with one GPU, two tasks that each need it run one
// after the other, never together.
func TestGPUsNeverShared(t *testing.T) {
	q := testutil.StartNATS(t, "embedded").Queue(t, queue.Options{})
	var mu sync.Mutex
	holders, peak := 0, 0
	exec := worker.ExecutorFunc(func(_ context.Context, task *schema.NodeTask, s worker.Slot) (*schema.NodeResult, error) {
		require.Equal(t, []string{"7"}, s.GPUs)
		mu.Lock()
		holders++
		peak = max(peak, holders)
		mu.Unlock()
		time.Sleep(300 * time.Millisecond) //nolint:forbidigo // a task holds its CPUs a while
		mu.Lock()
		holders--
		mu.Unlock()
		return okResult(), nil
	})
	startWorker(t, q, exec, worker.Config{Slots: 2, Cores: 2, GPUIDs: []string{"7"}, RequeueDelay: 100 * time.Millisecond})
	ts := tasks(2)
	for _, task := range ts {
		task.Limits.GPUs = 1
	}
	outs := execAll(t, q, ts)
	for _, o := range outs {
		require.True(t, o.OK())
	}
	require.Equal(t, 1, peak, "the GPU was shared")
}
