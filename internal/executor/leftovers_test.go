package executor

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/schema"
)

// uploadingExec is an executor that brings an attempt's files home.
func uploadingExec(t *testing.T) *Executor {
	t.Helper()
	t.Setenv("HOME", t.TempDir())
	q := testutil.StartNATS(t, "embedded").Queue(t, queue.Options{})
	st, err := q.Artifacts(context.Background())
	require.NoError(t, err)
	e, err := NewExecutor(Config{RunsDir: t.TempDir(), KillGrace: 200 * time.Millisecond, ArtifactStore: st})
	require.NoError(t, err)
	return e
}

// executeWithin runs task in a slot of its memory limit, failing the test
// if the executor has not answered within limit (a slot held by what the
// task left behind).
func executeWithin(t *testing.T, e *Executor, task *schema.NodeTask, limit time.Duration) *schema.NodeResult {
	t.Helper()
	return executeIn(t, e, task, worker.Slot{MemoryMB: task.Limits.MemoryMB}, limit)
}

func executeIn(t *testing.T, e *Executor, task *schema.NodeTask, slot worker.Slot, limit time.Duration) *schema.NodeResult {
	t.Helper()
	type answer struct {
		res *schema.NodeResult
		err error
	}
	done := make(chan answer, 1)
	start := time.Now()
	go func() {
		res, err := e.Execute(context.Background(), task, slot)
		done <- answer{res, err}
	}()
	select {
	case a := <-done:
		require.NoError(t, a.err)
		t.Logf("answered in %s", time.Since(start).Round(time.Millisecond))
		return a.res
	case <-time.After(limit):
		t.Fatalf("the executor has not answered in %s", limit)
		return nil
	}
}

// TestFIFOsDoNotHoldTheSlot: a task that leaves named pipes where its
// metrics file, an expected output and a plot would be ends at once: each
// is skipped with a note saying what it is (opening one to read would wait
// for a writer forever).
func TestFIFOsDoNotHoldTheSlot(t *testing.T) {
	e := uploadingExec(t)
	task := &schema.NodeTask{V: 1, RunID: "r1", NodeID: "fifo", Attempt: 1, Pool: "cpu", Artifacts: schema.Artifacts{
		Run: schema.RunPhase{Commands: []string{"mkfifo metrics.json out.txt plot.png && echo 'METRIC score=3'"}, ExpectedOutputs: []string{"out.txt"}}}}
	res := executeWithin(t, e, task, 30*time.Second)
	require.NotNil(t, res.Error)
	require.Equal(t, schema.ErrKindMissingOutput, res.Error.Kind)
	require.Contains(t, res.Error.Message, "out.txt (a named pipe)")
	require.Equal(t, 3.0, res.Metrics["score"], "the metric from the output stands")
	require.Contains(t, res.ArtifactsNote, "plots: skipped, not regular files: plot.png (a named pipe)")
	for _, a := range res.Artifacts {
		require.NotEqual(t, "plot.png", a.Name)
	}
	e2 := uploadingExec(t)
	task.NodeID, task.Artifacts.Run.ExpectedOutputs = "fifo2", nil
	res = executeWithin(t, e2, task, 30*time.Second)
	require.NotNil(t, res.Error, "metrics.json a named pipe is a bad metrics file")
	require.Contains(t, res.Error.Message, "metrics.json")
	require.Contains(t, res.Error.Message, "a named pipe")
}

// TestShallowPlotPastDeepJunk: a plot at the top of the workspace comes
// home though the task left more files under data/ than the walk visits;
// the note says the walk stopped and where.
func TestShallowPlotPastDeepJunk(t *testing.T) {
	e := uploadingExec(t)
	png := `printf '\211PNG\r\n\032\n' > zz-plot.png`
	task := &schema.NodeTask{V: 1, RunID: "r1", NodeID: "junk", Attempt: 1, Pool: "cpu", Artifacts: schema.Artifacts{
		Run: schema.RunPhase{Commands: []string{"mkdir -p data/cache && cd data/cache && seq 1 " + strconv.Itoa(plotVisited+2000) + " | xargs touch", png}}}}
	res := executeWithin(t, e, task, 2*time.Minute)
	require.Nil(t, res.Error)
	var names []string
	for _, a := range res.Artifacts {
		names = append(names, a.Name)
	}
	require.Contains(t, names, "zz-plot.png", "found before the junk: %v", names)
	require.Contains(t, res.ArtifactsNote, "plots: the walk stopped after 20000 entries (breadth first, at depth 2)")
	require.False(t, strings.Contains(res.ArtifactsNote, "zz-plot"))
}

// TestTmpBounded: a task with limits.memory_mb 64 that writes 256 MB to
// /tmp, then to /dev/shm and /var/tmp, gets 64 MB in all (the three are
// one tmpfs of that size), and its log says the bound was reached; where
// a memory cgroup holds the task too, what it keeps there counts against
// its limit. Without a memory limit, the worker's bound holds.
func TestTmpBounded(t *testing.T) {
	e := newExec(t)
	if e.sandbox == nil {
		t.Skip("no sandbox on this machine: " + e.Isolation())
	}
	task := &schema.NodeTask{V: 1, RunID: "r1", NodeID: "tmp", Attempt: 1, Pool: "cpu", Limits: schema.Limits{MemoryMB: 64},
		Artifacts: schema.Artifacts{Run: schema.RunPhase{Commands: []string{
			"head -c 256M /dev/zero > /tmp/big; head -c 16M /dev/zero > /dev/shm/more; head -c 16M /dev/zero > /var/tmp/more; " +
				"echo \"METRIC written=$(( ($(stat -c %s /tmp/big) + $(stat -c %s /dev/shm/more) + $(stat -c %s /var/tmp/more)) / 1048576 ))\"; " +
				"df -m /tmp /var/tmp /dev/shm | tail -n +2 | awk '{print \"size\", $2}'"}}}}
	res := executeIn(t, e, task, worker.Slot{}, time.Minute) // the tmpfs alone, no memory cgroup
	require.LessOrEqual(t, res.Metrics["written"], 64.0, "MB written to /tmp, /dev/shm and /var/tmp together")
	require.GreaterOrEqual(t, res.Metrics["written"], 60.0)
	log := res.Phases[len(res.Phases)-1].LogTail
	require.Contains(t, log, "No space left on device")
	require.Equal(t, 3, strings.Count(log, "size 64"), log)
	require.Contains(t, log, "hpcq-sandbox: /tmp, /var/tmp and /dev/shm (one tmpfs of 64 MB) were full")
	t.Log(log)

	// With the memory limit enforced too, the tmpfs pages are the task's
	// memory: it is stopped at 64 MB in all, by a full /tmp or its limit.
	task.NodeID = "tmp-mem"
	res = executeWithin(t, e, task, time.Minute)
	require.LessOrEqual(t, res.Metrics["written"], 64.0)
	if res.Error != nil {
		require.Contains(t, res.Error.Message, "memory limit (limits.memory_mb = 64 MB")
	}
	t.Logf("with the memory limit: %v MB written, %+v", res.Metrics["written"], res.Error)

	// No memory limit: the worker's bound (HPCQ_SANDBOX_TMP_MB).
	task.NodeID, task.Limits.MemoryMB = "tmp2", 0
	task.Artifacts.Run.Commands = []string{"df -m /tmp /var/tmp /dev/shm | tail -n +2 | awk '{print \"size\", $2}'"}
	res = executeWithin(t, e, task, time.Minute)
	require.Nil(t, res.Error)
	require.Equal(t, 3, strings.Count(res.Phases[len(res.Phases)-1].LogTail, "size "+strconv.Itoa(DefaultTmpMB)))
}

// v1OrSkip skips a test of the cgroup v1 limits where the worker cannot
// make them (no sandbox, no v1 controllers, not allowed), saying why.
func v1OrSkip(t *testing.T, e *Executor, memory bool) {
	t.Helper()
	switch {
	case e.v1 == nil:
		t.Skip("no cgroup v1 pids or memory controller this worker may use: " + e.v1Why)
	case memory && (e.v1.memory == "" || (e.v2 != nil && e.v2.memory)):
		t.Skip("the memory controller is not on a cgroup v1 this worker may use here")
	}
}

// TestForkBombBounded: a task that starts processes without end stops at
// its limits.pids (cgroup pids.max, v2 where its controller is delegated,
// else v1; the sandbox's PID namespace is the outer safety net), ends at
// its timeout, and says the limit refused its forks; its peak is recorded.
func TestForkBombBounded(t *testing.T) {
	e := newExec(t)
	var by string
	switch {
	case e.v2 != nil && e.v2.pids:
		by = pidsByCgroup
	case e.v1 != nil && e.v1.pids != "":
		by = pidsByCgroupV1
	default:
		t.Skipf("no pids controller this worker may use (v2: %s; v1: %s)", e.v2Why, e.v1Why)
	}
	res := executeWithin(t, e, forkBomb("bomb"), time.Minute)
	require.NotNil(t, res.Error)
	require.Regexp(t, `the task's process limit \(limits.pids = 64, cgroup (v1 )?pids.max\) refused \d+ forks`, res.Error.Message)
	require.NotNil(t, res.Limits)
	require.Equal(t, 64, res.Limits.Pids)
	require.Equal(t, by, res.Limits.PidsBy)
	require.Positive(t, res.Limits.PidsPeak)
	require.LessOrEqual(t, res.Limits.PidsPeak, int64(64))
	t.Logf("%s (%s); peak %d processes", res.Error.Message, by, res.Limits.PidsPeak)
}

// forkBomb is a task that starts 2,000 sleeping processes under a limit
// of 64, for 3 seconds.
func forkBomb(node string) *schema.NodeTask {
	return &schema.NodeTask{V: 1, RunID: "r1", NodeID: node, Attempt: 1, Pool: "cpu", Limits: schema.Limits{Pids: 64, RunTimeoutS: 3},
		Artifacts: schema.Artifacts{Run: schema.RunPhase{Commands: []string{"for i in $(seq 1 2000); do sleep 60 & done 2>/dev/null; wait"}}}}
}

// TestMemoryLimitV1: where memory is on cgroup v1, limits.memory_mb is the
// controller's memory.limit_in_bytes, not RLIMIT_AS: a program that
// reserves far more address space than it uses (as CUDA, the JVM and Go
// do) runs, and one that uses more is killed with the reason.
func TestMemoryLimitV1(t *testing.T) {
	requireGCC(t)
	e := newExec(t)
	v1OrSkip(t, e, true)
	prog := `#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
int main(int argc, char **argv) {
  size_t reserve = (size_t)8 << 30, use = (size_t)atoi(argv[1]) << 20;
  char *p = mmap(NULL, reserve, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) { perror("mmap"); return 3; }
  memset(p, 1, use);
  printf("METRIC used_mb=%zu\n", use >> 20);
  return 0;
}
`
	task := func(node string, useMB int) *schema.NodeTask {
		return &schema.NodeTask{V: 1, RunID: "r1", NodeID: node, Attempt: 1, Pool: "cpu", Limits: schema.Limits{MemoryMB: 64},
			Artifacts: schema.Artifacts{Coding: schema.CodingPhase{Workspace: schema.Workspace{Files: []schema.File{{Path: "reserve.c", Content: prog}}}},
				Compile: schema.CommandsPhase{Commands: []string{"gcc -O0 -o reserve reserve.c"}},
				Run:     schema.RunPhase{Commands: []string{"./reserve " + strconv.Itoa(useMB)}}}}
	}
	res := executeWithin(t, e, task("reserve", 16), time.Minute)
	require.Nil(t, res.Error, "8 GB reserved, 16 MB used, under a 64 MB limit")
	require.Equal(t, "cgroup-v1", res.Limits.Memory)
	require.Equal(t, 16.0, res.Metrics["used_mb"])

	res = executeWithin(t, e, task("hog", 256), time.Minute)
	require.NotNil(t, res.Error)
	require.Contains(t, res.Error.Message, "killed by the task's memory limit (limits.memory_mb = 64 MB, cgroup v1 memory.limit_in_bytes)")
}

// TestOtherWorkspacesHidden: a task sees its own workspace and nothing
// else of the worker's runs directory: not another node's workspace, not
// another run's, not the phase logs.
func TestOtherWorkspacesHidden(t *testing.T) {
	e := newExec(t)
	if e.sandbox == nil || !e.sandbox.hideFS {
		t.Skip("no sandbox hiding the file system on this machine: " + e.Isolation())
	}
	other := filepath.Join(e.cfg.RunsDir, "r0", "workspaces", "n9", "1")
	require.NoError(t, os.MkdirAll(other, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(other, "secret.txt"), []byte("another run's data"), 0o644))
	task := &schema.NodeTask{V: 1, RunID: "r1", NodeID: "peek", Attempt: 1, Pool: "cpu", Artifacts: schema.Artifacts{
		Coding: schema.CodingPhase{Workspace: schema.Workspace{Files: []schema.File{{Path: "mine.txt", Content: "my own"}}}},
		Run: schema.RunPhase{Commands: []string{"cat mine.txt; echo; cat " + filepath.Join(other, "secret.txt") + " 2>&1; ls " + e.cfg.RunsDir +
			"; ls " + filepath.Join(e.cfg.RunsDir, "r1") + "; echo METRIC seen=$(find " + e.cfg.RunsDir + " -type f 2>/dev/null | wc -l)"}}}}
	res := executeWithin(t, e, task, time.Minute)
	require.Nil(t, res.Error)
	log := res.Phases[len(res.Phases)-1].LogTail
	require.Contains(t, log, "my own")
	require.NotContains(t, log, "another run's data")
	require.Contains(t, log, "No such file or directory")
	require.Equal(t, 1.0, res.Metrics["seen"], "only its own file: %s", log)
	require.Contains(t, log, "\nr1\nworkspaces\nMETRIC", "the runs directory shows the task's own run and workspace only (no r0, no phase_logs)")
}

// TestDiskBounded: a task whose workspace grows past limits.disk_mb while
// it runs is stopped within about a second, with a reason naming the
// bound; a sparse file counts what it occupies, not its size.
func TestDiskBounded(t *testing.T) {
	e := newExec(t)
	task := &schema.NodeTask{V: 1, RunID: "r1", NodeID: "disk", Attempt: 1, Pool: "cpu", Limits: schema.Limits{DiskMB: 32, RunTimeoutS: 60},
		Artifacts: schema.Artifacts{Run: schema.RunPhase{Commands: []string{
			"truncate -s 10G sparse.bin && for i in $(seq 1 600); do head -c 1M /dev/zero > f$i; sleep 0.02; done"}}}}
	start := time.Now()
	res := executeWithin(t, e, task, 30*time.Second)
	require.NotNil(t, res.Error)
	require.Contains(t, res.Error.Message, "stopped: the workspace held more than limits.disk_mb (32 MB) on disk")
	require.Less(t, time.Since(start), 15*time.Second, "stopped, not run to its end (12 s) or timeout")
	require.Equal(t, 32, res.Limits.DiskMB)
	t.Log(res.Error.Message)

	// A phase that writes past the bound and ends before it is measured
	// still fails (measured once more at its end; on a slow machine the
	// watch may stop it first).
	task.NodeID = "disk-fast"
	task.Artifacts.Run.Commands = []string{"head -c 64M /dev/zero > big"}
	res = executeWithin(t, e, task, 30*time.Second)
	require.NotNil(t, res.Error)
	require.Contains(t, res.Error.Message, "stopped: the workspace held more than limits.disk_mb (32 MB) on disk")
}
