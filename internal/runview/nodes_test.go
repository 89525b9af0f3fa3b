package runview

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/search"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/internal/tree"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// TestListNodesSeesChanges: what ListNodes keeps of a node's files is
// read again when a file is replaced (as the engine writes it: a rename),
// appears, goes, or is written again in place.
func TestListNodesSeesChanges(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	nd := filepath.Join(dir, "nodes", "n0001")
	require.NoError(t, os.MkdirAll(nd, 0o755))
	put := func(name, content string) {
		t.Helper()
		tmp := filepath.Join(nd, name+".tmp")
		require.NoError(t, os.WriteFile(tmp, []byte(content), 0o644))
		require.NoError(t, os.Rename(tmp, filepath.Join(nd, name)))
	}
	one := func() NodeLine {
		t.Helper()
		lines, err := ListNodes(dir)
		require.NoError(t, err)
		require.Len(t, lines, 1)
		return lines[0]
	}
	require.Equal(t, schema.NodePreparing, one().Status)
	put("task.json", `{"node_id":"n0001","attempt":1,"kind":"draft","stage":1}`)
	require.Equal(t, NodeLine{Node: "n0001", Status: schema.NodeQueued, Attempt: 1, Kind: "draft", Stage: 1}, one())
	put("result.json", `{"buggy":false,"metric":2.5}`)
	l := one()
	require.Equal(t, "ok", l.Status)
	require.Equal(t, "2.5", l.Metric)
	put("result.json", `{"buggy":true,"reason":"no metric","result":{"v":1}}`) // same size or not: a new file
	l = one()
	require.Equal(t, "failed", l.Status)
	require.Empty(t, l.Metric)
	require.Nil(t, l.Value)
	require.Equal(t, "no metric", l.Reason)
	// Written in place, longer: read again.
	require.NoError(t, os.WriteFile(filepath.Join(nd, "result.json"), []byte(`{"buggy":false,"metric":3.25, "reason":""}`), 0o644))
	require.Equal(t, "3.25", one().Metric)
	require.NoError(t, os.Remove(filepath.Join(nd, "result.json")))
	require.Equal(t, schema.NodeQueued, one().Status)
	require.NoError(t, os.WriteFile(filepath.Join(nd, "result.json"), []byte(`{`), 0o644))
	_, err := ListNodes(dir)
	require.ErrorContains(t, err, "result.json")
}

// TestListNodesKeepsEndedNodes: a node the tree journal says ended is
// read once after the end and then listed without its files being looked
// at again (its files are final); a journal written anew (a run directory
// reused) forgets what was kept. Ids sort as made: n10000 after n9999.
func TestListNodesKeepsEndedNodes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	journal := filepath.Join(dir, rundir.JournalDir, "tree.journal")
	require.NoError(t, os.MkdirAll(filepath.Dir(journal), 0o755))
	tr, err := search.OpenTree(journal)
	require.NoError(t, err)
	// On the search's goroutines: errors with t.Error, not require.
	put := func(id, name, content string) {
		nd := filepath.Join(dir, rundir.NodeFile(id))
		tmp := filepath.Join(nd, name+".tmp")
		if err := errors.Join(os.MkdirAll(nd, 0o755), os.WriteFile(tmp, []byte(content), 0o644), os.Rename(tmp, filepath.Join(nd, name))); err != nil {
			t.Error(err)
		}
	}
	// As the engine does: task.json before the run, result.json before
	// the journal records the end.
	runner := search.RunnerFunc(func(_ context.Context, n *tree.Node) (search.Result, error) {
		put(n.ID, rundir.TaskFile, fmt.Sprintf(`{"node_id":%q,"attempt":1,"kind":%q}`, n.ID, n.Kind))
		i, err := strconv.Atoi(n.ID[1:])
		if err != nil {
			t.Error(err)
		}
		put(n.ID, rundir.ResultFile, fmt.Sprintf(`{"buggy":false,"metric":%d}`, i))
		return search.Result{Metric: 1, HasMetric: true}, nil
	})
	search.Run(context.Background(), tr, search.Policy{NumDrafts: 3, Maximize: true}, runner, 1, 12, search.Lockstep)
	require.NoError(t, tr.Close())

	first, err := ListNodes(dir)
	require.NoError(t, err)
	require.Len(t, first, 12)
	for i, l := range first {
		require.Equal(t, fmt.Sprintf("n%04d", i+1), l.Node)
		require.Equal(t, "ok", l.Status)
		require.Equal(t, strconv.Itoa(i+1), l.Metric)
	}
	again, err := ListNodes(dir)
	require.NoError(t, err)
	require.Equal(t, first, again)

	// Written again in place (the engine never does): not looked at.
	nd := filepath.Join(dir, rundir.NodeFile("n0001"))
	require.NoError(t, os.WriteFile(filepath.Join(nd, rundir.ResultFile), []byte(`{"buggy":true,"reason":"rewritten","result":{"v":1}}`), 0o644))
	again, err = ListNodes(dir)
	require.NoError(t, err)
	require.Equal(t, "ok", again[0].Status)

	// The journal replaced by another file: read again.
	testutil.ReplaceWithCopy(t, journal)
	again, err = ListNodes(dir)
	require.NoError(t, err)
	require.Equal(t, "failed", again[0].Status)
	require.Equal(t, "rewritten", again[0].Reason)
	require.Equal(t, first[1:], again[1:])
}

// TestFillRunningDeclined: a queued node a live worker handed back is
// shown declined with the worker's reason; one another worker runs now is
// running; a decline of another attempt, or by a lost worker, is not the
// node's.
func TestFillRunningDeclined(t *testing.T) {
	t.Parallel()
	now := time.Now()
	lines := []NodeLine{
		{Node: "n1", Status: schema.NodeQueued, Attempt: 1},
		{Node: "n2", Status: schema.NodeQueued, Attempt: 1},
		{Node: "n3", Status: schema.NodeQueued, Attempt: 2},
		{Node: "n4", Status: schema.NodeQueued, Attempt: 1},
	}
	declined := func(node string, attempt int) queue.DeclinedTask {
		return queue.DeclinedTask{Run: "r", Node: node, Attempt: attempt, Reason: "its time limits (1h0m0s) do not fit", At: now.Add(-3 * time.Second)}
	}
	workers := []queue.WorkerStatus{
		{WorkerInfo: queue.WorkerInfo{ID: "short", Declined: []queue.DeclinedTask{declined("n1", 1), declined("n2", 1), declined("n3", 1)}}},
		{WorkerInfo: queue.WorkerInfo{ID: "long", Tasks: []queue.RunningTask{{Run: "r", Node: "n2", Attempt: 1, Started: now}}}},
		{WorkerInfo: queue.WorkerInfo{ID: "gone", Declined: []queue.DeclinedTask{declined("n4", 1)}}, Lost: true},
	}
	FillRunning(lines, "r", workers)
	require.Equal(t, schema.NodeDeclined, lines[0].Status)
	require.Equal(t, "declined by worker short 3s ago: its time limits (1h0m0s) do not fit; waiting for a worker that can run it", lines[0].Reason)
	require.Equal(t, schema.NodeRunning, lines[1].Status)
	require.Equal(t, "long", lines[1].Worker)
	require.Equal(t, schema.NodeQueued, lines[2].Status, "another attempt's decline")
	require.Equal(t, schema.NodeQueued, lines[3].Status, "a lost worker's decline")
}

// TestMetricText: an evaluator's measure says so and shows the program's
// own number beside it; the program's own number alone, where an
// evaluator judged the node, is marked self-reported.
func TestMetricText(t *testing.T) {
	v, self := 966.0, 1.0
	text, val := metricText(rundir.Outcome{Metric: &v, MetricFrom: rundir.MetricFromEvaluator, SelfReported: &self})
	require.Equal(t, "966 (evaluated; self-reported 1)", text)
	require.Equal(t, 966.0, *val)
	text, _ = metricText(rundir.Outcome{Metric: &v, MetricFrom: rundir.MetricFromEvaluator, Spread: &schema.Spread{Q1: 950, Q3: 980, Low: 940, High: 990, N: 5}})
	require.Equal(t, "966 [940, 990] (evaluated)", text, "the metric's 95% interval beside it")
	text, _ = metricText(rundir.Outcome{Metric: &v})
	require.Equal(t, "966", text, "a search without an evaluator: as before")
	twelve := 12.0
	text, val = metricText(rundir.Outcome{Result: &schema.NodeResult{Metrics: map[string]float64{"gflops": 5000},
		Evaluation: &schema.Evaluation{Correct: true, Metric: &twelve}}})
	require.Equal(t, "evaluated=12", text)
	require.Nil(t, val)
	text, _ = metricText(rundir.Outcome{Buggy: true, Result: &schema.NodeResult{Metrics: map[string]float64{"gflops": 5000},
		Evaluation: &schema.Evaluation{Reason: "incorrect on N=10"}}})
	require.Equal(t, "self-reported gflops=5000", text, "the liar's number, marked")
}

// TestListNodesHeldOut: a gated node's line ends with the held-out gate's
// verdict, and says it in HeldOut; a node the gate did not take has none.
func TestListNodesHeldOut(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	v, self, held, drop := 4.4, 3.7, 2.8, 0.25
	for id, o := range map[string]rundir.Outcome{
		"n0001": {Node: "n0001", Status: schema.NodeOK, Metric: &v, MetricFrom: rundir.MetricFromEvaluator, SelfReported: &self},
		"n0002": {Node: "n0002", Status: schema.NodeOK, Metric: &v},
		"n0003": {Node: "n0003", Status: schema.NodeOK, Metric: &v, Spread: &schema.Spread{Q1: 4.3, Q3: 4.5, Low: 4.2, High: 4.6, N: 5}},
	} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "nodes", id), 0o755))
		require.NoError(t, rundir.WriteJSON(filepath.Join(dir, "nodes", id, rundir.ResultFile), o))
	}
	require.NoError(t, rundir.WriteJSON(filepath.Join(dir, rundir.GateFile), rundir.Gate{Nodes: []rundir.GatedNode{
		{Node: "n0001", Verdict: rundir.HeldOverfit, HeldOutMetric: &held, Drop: &drop, Reason: "25% below its standing"},
		{Node: "n0002", Verdict: rundir.HeldIncorrect, Reason: "incorrect: error 0.96 > 1e-09 on N=1000,ITERS=200"},
	}}))
	lines, err := ListNodes(dir)
	require.NoError(t, err)
	require.Len(t, lines, 3)
	require.Equal(t, "overfit 2.8 (25% below its search standing)", lines[0].HeldOut)
	require.Equal(t, "4.4 (evaluated; self-reported 3.7); held-out overfit 2.8 (25% below its search standing)", lines[0].Metric)
	require.Equal(t, "incorrect: error 0.96 > 1e-09 on N=1000,ITERS=200", lines[1].HeldOut)
	require.Equal(t, "4.4; held-out incorrect: error 0.96 > 1e-09 on N=1000,ITERS=200", lines[1].Metric)
	require.Empty(t, lines[2].HeldOut)
	require.Equal(t, "4.4 [4.2, 4.6]", lines[2].Metric)
	require.Equal(t, 4.2, *lines[2].Low, "the dashboard's error bar")
	require.Equal(t, 4.6, *lines[2].High)
	require.Nil(t, lines[1].Low, "measured once: no bar")
}

// TestSnapshotHeldOut: `scheduler status` says what the held-out gate
// found and which node is the run's best.
func TestSnapshotHeldOut(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, rundir.WriteJSON(filepath.Join(dir, rundir.SpecFile), map[string]any{"metric": map[string]string{"name": "gflops", "unit": "GFLOP/s"}}))
	best := 5.813238572431033
	require.NoError(t, rundir.WriteJSON(filepath.Join(dir, rundir.GateFile), rundir.Gate{Inputs: 2, Best: "n0007", BestMetric: &best,
		Nodes: []rundir.GatedNode{{Node: "n0007", Verdict: rundir.HeldHeld, SearchMetric: 4.4}, {Node: "n0006", Verdict: rundir.HeldIncorrect, SearchMetric: 5.4}}}))
	s, err := ReadSnapshot(dir)
	require.NoError(t, err)
	require.Equal(t, "n0007", s.Best, "the run's best is the gate's, not the search's n0006")
	require.Equal(t, 4.4, *s.Value)
	var b strings.Builder
	require.NoError(t, s.Write(&b))
	require.Contains(t, b.String(), "best n0007: gflops = 4.4 GFLOP/s (the best on the held-out inputs)")
	require.Contains(t, b.String(), "held-out gate: 2 nodes on 2 inputs the search never saw (1 held, 0 overfit, 1 incorrect, 0 failed); "+
		"the run's best is n0007: gflops = 5.81324 GFLOP/s\n")
}
