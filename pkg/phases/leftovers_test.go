package phases

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/schema"
	"github.com/hpcq/hpcq/pkg/worker"
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

// executeWithin runs task, failing the test if the executor has not
// answered within limit (a slot held by what the task left behind).
func executeWithin(t *testing.T, e *Executor, task *schema.NodeTask, limit time.Duration) *schema.NodeResult {
	t.Helper()
	type answer struct {
		res *schema.NodeResult
		err error
	}
	done := make(chan answer, 1)
	start := time.Now()
	go func() {
		res, err := e.Execute(context.Background(), task, worker.Slot{})
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
// one tmpfs of that size), and its log says the bound was reached.
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
	res := executeWithin(t, e, task, time.Minute)
	require.LessOrEqual(t, res.Metrics["written"], 64.0, "MB written to /tmp, /dev/shm and /var/tmp together")
	require.GreaterOrEqual(t, res.Metrics["written"], 60.0)
	log := res.Phases[len(res.Phases)-1].LogTail
	require.Contains(t, log, "No space left on device")
	require.Equal(t, 3, strings.Count(log, "size 64"), log)
	require.Contains(t, log, "hpcq-sandbox: /tmp, /var/tmp and /dev/shm (one tmpfs of 64 MB) were full")
	t.Log(log)

	// No memory limit: the worker's bound (HPCQ_SANDBOX_TMP_MB).
	task.NodeID, task.Limits.MemoryMB = "tmp2", 0
	task.Artifacts.Run.Commands = []string{"df -m /tmp /var/tmp /dev/shm | tail -n +2 | awk '{print \"size\", $2}'"}
	res = executeWithin(t, e, task, time.Minute)
	require.Nil(t, res.Error)
	require.Equal(t, 3, strings.Count(res.Phases[len(res.Phases)-1].LogTail, "size "+strconv.Itoa(DefaultTmpMB)))
}
