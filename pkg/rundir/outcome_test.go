package rundir_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// TestStatusOf: every way a node ends has one status and error kind.
func TestStatusOf(t *testing.T) {
	t.Parallel()
	v := 2.5
	ok := &schema.NodeResult{Metrics: map[string]float64{"gflops": v}}
	failed := &schema.NodeResult{Error: &schema.ResultError{Kind: schema.ErrKindCompileFailed, Phase: "compile"}}
	canceled := &schema.NodeResult{Error: &schema.ResultError{Kind: schema.ErrKindCanceled}}
	for name, c := range map[string]struct {
		o            rundir.Outcome
		status, kind string
	}{
		"ok":                     {rundir.Outcome{Result: ok, Metric: &v}, schema.NodeOK, ""},
		"task failed":            {rundir.Outcome{Result: failed, Buggy: true}, schema.NodeFailed, schema.ErrKindCompileFailed},
		"metric missing":         {rundir.Outcome{Result: ok, Buggy: true}, schema.NodeFailed, schema.ErrKindMetric},
		"canceled while running": {rundir.Outcome{Result: canceled, Buggy: true}, schema.NodeCanceled, schema.ErrKindCanceled},
		"canceled before":        {rundir.Outcome{Canceled: true, NotRun: true, Buggy: true}, schema.NodeCanceled, schema.ErrKindCanceled},
		"dead letter":            {rundir.Outcome{DeadLetter: &rundir.DeadLetter{Reason: "x"}, Buggy: true}, schema.NodeDeadLettered, schema.ErrKindDeadLetter},
		"model gave nothing":     {rundir.Outcome{NotRun: true, Buggy: true}, schema.NodeNotRun, schema.ErrKindLLM},
		"cached":                 {rundir.Outcome{Result: ok, Cached: true, Metric: &v}, schema.NodeCached, ""},
		"no answer":              {rundir.Outcome{Buggy: true}, schema.NodeNoAnswer, ""},
	} {
		status, kind := c.o.StatusOf()
		require.Equal(t, c.status, status, name)
		require.Equal(t, c.kind, kind, name)
	}
}

// TestOutcomeOfEveryVersion: result.json files written before Outcome (a
// tree search's "node" without a status, an exec's line) read alike.
func TestOutcomeOfEveryVersion(t *testing.T) {
	t.Parallel()
	var o rundir.Outcome
	require.NoError(t, json.Unmarshal([]byte(`{"node":"n0003","buggy":true,"reason":"no answer",
		"dead_letter":{"Pool":"cpu","Reason":"worker lost","Deliveries":5,"Data":"e30="}}`), &o))
	require.Equal(t, "n0003", o.Node)
	require.Equal(t, schema.NodeDeadLettered, o.Status, "the status of a file that had none")
	require.Equal(t, "worker lost", o.DeadLetter.Reason)
	require.EqualValues(t, 5, o.DeadLetter.Deliveries)

	o = rundir.Outcome{}
	require.NoError(t, json.Unmarshal([]byte(`{"node_id":"t1","attempt":2,"status":"failed","result":{"v":1,"node_id":"t1"}}`), &o))
	require.Equal(t, "t1", o.Node)
	require.Equal(t, 2, o.Attempt)
	require.Equal(t, schema.NodeFailed, o.Status, "a recorded status is kept")

	o = rundir.Outcome{Node: "n1", Result: &schema.NodeResult{}, Metric: new(1.5)}
	o.Seal()
	data, err := json.Marshal(o)
	require.NoError(t, err)
	var back rundir.Outcome
	require.NoError(t, json.Unmarshal(data, &back))
	require.Equal(t, o, back)
	require.Contains(t, string(data), `"node_id":"n1","status":"ok"`)
}
