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
