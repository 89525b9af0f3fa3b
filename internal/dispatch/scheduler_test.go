package dispatch

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/schema"
)

func TestLoadTasks(t *testing.T) {
	dir := t.TempDir()
	one := filepath.Join(dir, "one.json")
	require.NoError(t, os.WriteFile(one, []byte(`{"v":1,"node_id":"a","artifacts":{"run":{"commands":["true"]}}}`), 0o644))
	many := filepath.Join(dir, "many.json")
	require.NoError(t, os.WriteFile(many, []byte(`[
		{"v":1,"node_id":"b","pool":"gpu","attempt":2,"artifacts":{"run":{"commands":["true"]}}},
		{"v":1,"node_id":"c","artifacts":{"compile":{"commands":["make"]}}}]`), 0o644))
	tasks, err := LoadTasks([]string{one, many}, "run-1")
	require.NoError(t, err)
	require.Len(t, tasks, 3)
	require.Equal(t, "run-1", tasks[0].RunID)
	require.Equal(t, 1, tasks[0].Attempt)
	require.Equal(t, "cpu", tasks[0].Pool)
	require.Equal(t, "gpu", tasks[1].Pool)
	require.Equal(t, 2, tasks[1].Attempt)

	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`[{"v":1,"node_id":"ok","artifacts":{"run":{"commands":["x"]}}},{"v":1,"node_id":"x","artifacts":{"run":{"commands":["x"]}},"limits":{"cpus":-2}}]`), 0o644))
	_, err = LoadTasks([]string{bad}, "run-1")
	require.ErrorContains(t, err, "bad.json[1]: invalid message: limits.cpus: -2")
	_, err = LoadTasks([]string{bad}, "no/slashes")
	require.ErrorContains(t, err, "run_id")
}

func TestNewRunIDIsValid(t *testing.T) {
	a, b := NewRunID(), NewRunID()
	require.NotEqual(t, a, b)
	task := schema.NodeTask{V: 1, RunID: a, NodeID: "n", Attempt: 1, Pool: "cpu",
		Artifacts: schema.Artifacts{Run: schema.RunPhase{Commands: []string{"true"}}}}
	require.NoError(t, task.Validate())
}

func TestWriteOutcomes(t *testing.T) {
	twelve := 12.0
	ok := &schema.NodeTask{NodeID: "good", Attempt: 1}
	bad := &schema.NodeTask{NodeID: "bad", Attempt: 2}
	dead := &schema.NodeTask{NodeID: "dead", Attempt: 1}
	none := &schema.NodeTask{NodeID: "none", Attempt: 1}
	outs := []Outcome{
		{Task: ok, Result: &schema.NodeResult{Worker: "w1", DurationMS: 1500, Metrics: map[string]float64{"time_s": 0.25, "gflops": 5.548}, Phases: []schema.PhaseResult{
			{Name: "coding", OK: true}, {Name: "compile", OK: true}, {Name: "run", OK: true}}}},
		{Task: bad, Result: &schema.NodeResult{Worker: "w2", DurationMS: 20, Phases: []schema.PhaseResult{{Name: "run", ExitCode: 3}},
			Error: &schema.ResultError{Phase: "run", Kind: schema.ErrKindRunFailed, Message: "exit\n3"}}},
		{Task: dead, DeadLetter: &queue.DeadLetter{Reason: "max deliveries reached", Worker: "w3"}},
		{Task: none},
		{Task: &schema.NodeTask{NodeID: "evaluated", Attempt: 1}, Result: &schema.NodeResult{Worker: "w1", DurationMS: 900, Metrics: map[string]float64{"gflops": 5000},
			Evaluation: &schema.Evaluation{Stage: schema.EvalSearch, Correct: true, Metric: &twelve, Unit: "GFLOP/s"}}},
		{Task: &schema.NodeTask{NodeID: "liar", Attempt: 1}, Result: &schema.NodeResult{Worker: "w1", DurationMS: 900, Metrics: map[string]float64{"gflops": 5000},
			Evaluation: &schema.Evaluation{Stage: schema.EvalSearch, Reason: "incorrect on N=10: got 42, want 55"},
			Error:      &schema.ResultError{Phase: schema.PhaseEvaluate, Kind: schema.ErrKindIncorrect, Message: "incorrect on N=10: got 42, want 55"}}},
	}
	var b bytes.Buffer
	require.NoError(t, WriteOutcomes(&b, outs))
	require.Equal(t, `NODE       ATTEMPT  STATUS         DURATION  EXIT CODES       WORKER  METRICS                                            ERROR
good       1        ok             1.5s      compile=0 run=0  w1      gflops=5.548 time_s=0.25                           
bad        2        failed         20ms      run=3            w2      -                                                  run_failed in run: exit 3
dead       1        dead_lettered  -         -                w3      -                                                  max deliveries reached
none       1        no_answer      -         -                -       -                                                  
evaluated  1        ok             900ms     -                w1      evaluated=12 GFLOP/s (self-reported: gflops=5000)  
liar       1        failed         900ms     -                w1      (self-reported: gflops=5000)                       incorrect in evaluate: incorrect on N=10: got 42, want 55
`, b.String())
	require.True(t, outs[0].OK())
	require.False(t, outs[1].OK())
	require.False(t, outs[2].OK())
}
