package executor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/schema"
)

// counted is a run phase that prints a different time each run: its
// first run (the warm-up) slow, the measured ones 4, 1, 3, 2 s.
const counted = `n=$(cat runs 2>/dev/null || echo 0); echo $((n + 1)) > runs
set -- 30 4 1 3 2 9; shift $n; echo "METRIC t=$1 s"`

// TestMeasuredRun: without an evaluator the run phase runs a warm-up and
// the task's repeats; the metric is the median of the measured runs, with
// every sample (the warm-up's as repeat 0) and their spread.
func TestMeasuredRun(t *testing.T) {
	e := newExec(t)
	task := shellTask("measured", counted)
	task.Measure = &schema.Measure{Metric: "t", Repeats: 4}
	require.NoError(t, task.Validate())
	res, err := e.Execute(context.Background(), task, worker.Slot{Cores: 1})
	require.NoError(t, err)
	require.Nil(t, res.Error, "%+v", res.Error)
	ev := res.Evaluation
	require.NotNil(t, ev)
	require.Equal(t, schema.EvalRun, ev.Stage)
	require.False(t, ev.ByHarness())
	require.Equal(t, 2.5, *ev.Metric, "the median of 4, 1, 3, 2; the warm-up's 30 left out")
	require.Equal(t, "s", ev.Unit)
	require.Len(t, ev.Samples, 5)
	require.Equal(t, 0, ev.Samples[0].Repeat)
	require.Equal(t, 30.0, *ev.Samples[0].Metric)
	require.NotNil(t, ev.Spread)
	require.Equal(t, 4, ev.Spread.N)
	require.Equal(t, 2.0, res.Metrics["t"], "the last run's own report")
	var runs int
	for _, p := range res.Phases {
		if p.Name == schema.PhaseRun {
			runs++
		}
	}
	require.Equal(t, 1, runs, "one run phase in the result: the last")
	require.NoError(t, ev.Validate())
}

// TestMeasuredRunFails: a run that fails ends the phase, saying which;
// a metric a run did not report leaves the last run's value alone.
func TestMeasuredRunFails(t *testing.T) {
	e := newExec(t)
	task := shellTask("fails", `n=$(cat runs 2>/dev/null || echo 0); echo $((n + 1)) > runs; [ $n -lt 2 ] || exit 3; echo "METRIC t=1"`)
	task.Measure = &schema.Measure{Metric: "t", Repeats: 3}
	res, err := e.Execute(context.Background(), task, worker.Slot{Cores: 1})
	require.NoError(t, err)
	require.NotNil(t, res.Error)
	require.Equal(t, schema.ErrKindRunFailed, res.Error.Kind)
	require.Contains(t, res.Error.Message, "run 3 of 4")
	require.Nil(t, res.Evaluation)

	// metrics.json written by the first run only: not read again.
	once := shellTask("once", `[ -e metrics.json ] || echo '{"t": 5}' > metrics.json`)
	once.Measure = &schema.Measure{Metric: "t", Repeats: 2}
	res, err = e.Execute(context.Background(), once, worker.Slot{Cores: 1})
	require.NoError(t, err)
	require.Nil(t, res.Error)
	require.Nil(t, res.Evaluation, "the measured runs reported nothing of their own")
	require.Equal(t, 5.0, res.Metrics["t"])
}
