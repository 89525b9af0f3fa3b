package executor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/schema"
)

// harness is an evaluator in the contract's shape: it runs the node's
// program (a file `sum` the node's compile left: it prints the sum of 1..N)
// on each input, checks it against its own reference, times it itself and
// writes the report; it also tries what a harness must not be able to do:
// change the node's files.
var harness = []schema.File{{Path: "eval.sh", Mode: "0755", Content: `#!/bin/sh
set -u
: > "$HPCQ_EVAL_REPORT"
echo tamper >> "$HPCQ_NODE/sum" 2>/dev/null && echo "node writable" >> "$HPCQ_EVAL_REPORT.notes"
printf '%s\n' "$HPCQ_INPUTS" | while IFS== read -r name n; do
	want=$(( n * (n + 1) / 2 ))
	for rep in 0 1 2; do
		got=$(sh "$HPCQ_NODE/sum" "$n")
		if [ "$got" = "$want" ]; then
			printf '{"input":"N=%s","repeat":%d,"correct":true,"error":0,"metric":%d,"unit":"sums/s"}\n' "$n" "$rep" "$((n + rep))" >> "$HPCQ_EVAL_REPORT"
		else
			printf '{"input":"N=%s","repeat":%d,"correct":false,"note":"got %s, want %s"}\n' "$n" "$rep" "$got" "$want" >> "$HPCQ_EVAL_REPORT"
		fi
	done
done
`}}

// evalTask is a node whose run phase writes `sum` and prints a metric about
// itself (METRIC score=...), with the harness above.
func evalTask(node, sum, selfReport string, inputs ...string) *schema.NodeTask {
	t := shellTask(node, "cat > sum <<'EOF'\n"+sum+"\nEOF", "echo 'METRIC score="+selfReport+"'",
		// The node's program looks for the harness while it runs: it is not there.
		`ls -d "$HPCQ_WORKSPACE"/../../../evaluate 2>/dev/null && echo saw > saw-harness || true`)
	t.Evaluate = &schema.Evaluate{Files: harness, Commands: []string{"./eval.sh"}, Inputs: inputs, Stage: schema.EvalSearch, Repeats: 2}
	return t
}

// TestEvaluatePhase: the harness, not the program, decides: the honest node
// gets the harness's metric (its own stays as it said it); the liar (a fine
// number, no work) and the node right only for the size searched are
// incorrect with the harness's words; the node's program never sees the
// harness, and the harness cannot change the node's files.
func TestEvaluatePhase(t *testing.T) {
	e := sandboxed(t)
	honest := evalTask("honest", `n=$1; echo $(( n * (n + 1) / 2 ))`, "7", "N=10", "N=1531")
	res, err := e.Execute(context.Background(), honest, worker.Slot{Cores: 1})
	require.NoError(t, err)
	require.Nil(t, res.Error, "%+v", res.Error)
	ev := res.Evaluation
	require.NotNil(t, ev)
	require.True(t, ev.Correct, ev.Reason)
	require.Equal(t, schema.EvalSearch, ev.Stage)
	// Medians of repeats 1 and 2 (repeat 0 a warm-up): 11.5 and 1532.5.
	require.InDelta(t, 132.75, *ev.Metric, 0.01, "the geometric mean of the inputs' medians")
	require.Equal(t, "sums/s", ev.Unit)
	require.Len(t, ev.Samples, 6)
	require.Equal(t, 7.0, res.Metrics["score"], "the program's own number stays, as what it said of itself")
	require.Equal(t, schema.PhaseEvaluate, res.Phases[len(res.Phases)-1].Name)
	require.NoFileExists(t, filepath.Join(e.WorkspaceDir(honest), "saw-harness"), "the node's program saw the harness's workspace")
	sum, err := os.ReadFile(filepath.Join(e.WorkspaceDir(honest), "sum"))
	require.NoError(t, err)
	require.NotContains(t, string(sum), "tamper", "the harness changed the node's files")
	require.NoFileExists(t, filepath.Join(e.EvaluateDir(honest), reportName+".notes"))

	liar := evalTask("liar", `echo 42`, "5000", "N=10")
	res, err = e.Execute(context.Background(), liar, worker.Slot{Cores: 1})
	require.NoError(t, err)
	require.NotNil(t, res.Error)
	require.Equal(t, schema.ErrKindIncorrect, res.Error.Kind)
	require.Equal(t, schema.PhaseEvaluate, res.Error.Phase)
	require.Equal(t, "incorrect on N=10: got 42, want 55", res.Error.Message)
	require.Nil(t, res.Evaluation.Metric, "an incorrect node has no metric")
	require.Equal(t, 5000.0, res.Metrics["score"])
	require.DirExists(t, e.EvaluateDir(honest), "an earlier node's evaluation is on disk...")
	require.NoFileExists(t, filepath.Join(e.WorkspaceDir(liar), "saw-harness"), "...and hidden from a later node's program")

	// The quick pass: a node wrong on the small input is not measured.
	quickLiar := evalTask("quick-liar", `echo 42`, "5000", "N=10")
	quickLiar.Evaluate.Quick = []string{"N=3"}
	res, err = e.Execute(context.Background(), quickLiar, worker.Slot{Cores: 1})
	require.NoError(t, err)
	require.Equal(t, schema.ErrKindIncorrect, res.Error.Kind)
	require.Equal(t, schema.PhaseEvaluateQuick, res.Error.Phase)
	require.Equal(t, "incorrect on N=3: got 42, want 6", res.Error.Message)
	require.Equal(t, schema.PhaseEvaluateQuick, res.Phases[len(res.Phases)-1].Name, "no full pass after a wrong quick one")
	require.False(t, res.Phases[len(res.Phases)-1].OK, "the harness exited 0, and the node failed its pass: the phase failed")
	quickHonest := evalTask("quick-honest", `n=$1; echo $(( n * (n + 1) / 2 ))`, "7", "N=10")
	quickHonest.Evaluate.Quick = []string{"N=3"}
	res, err = e.Execute(context.Background(), quickHonest, worker.Slot{Cores: 1})
	require.NoError(t, err)
	require.Nil(t, res.Error)
	names := []string{}
	for _, p := range res.Phases {
		names = append(names, p.Name)
	}
	require.Equal(t, []string{schema.PhaseCoding, schema.PhaseRun, schema.PhaseEvaluateQuick, schema.PhaseEvaluate}, names)
	require.InDelta(t, 11.5, *res.Evaluation.Metric, 1e-9)

	sizeOnly := evalTask("size-only", `n=$1; if [ "$n" = 10 ]; then echo 55; else echo 0; fi`, "9", "N=10", "N=1531")
	res, err = e.Execute(context.Background(), sizeOnly, worker.Slot{Cores: 1})
	require.NoError(t, err)
	require.Equal(t, schema.ErrKindIncorrect, res.Error.Kind)
	require.Equal(t, "incorrect on N=1531: got 0, want 1172746", res.Error.Message)
}

// TestEvaluateFailures: a harness that exits non-zero, writes no report,
// writes one hpcq does not take, or leaves a link in its place is no
// verdict on the node: evaluate_failed, with why.
func TestEvaluateFailures(t *testing.T) {
	e := sandboxed(t)
	for name, c := range map[string]struct{ cmd, want string }{
		"exit":   {`echo "reference missing" >&2; exit 3`, "the harness failed: "},
		"none":   {`true`, "wrote no report"},
		"bad":    {`echo '{"input":"N=1","repeat":1,"correct":"yes"}' > "$HPCQ_EVAL_REPORT"`, "evaluation report: line 1"},
		"link":   {`ln -s /etc/passwd "$HPCQ_EVAL_REPORT"`, "the harness's report"},
		"silent": {`: > "$HPCQ_EVAL_REPORT"`, "reported no measured repeat of input N=1"},
	} {
		task := evalTask("fail-"+name, `echo 1`, "1", "N=1")
		task.Evaluate.Files, task.Evaluate.Commands = nil, []string{c.cmd}
		res, err := e.Execute(context.Background(), task, worker.Slot{Cores: 1})
		require.NoError(t, err, name)
		require.NotNil(t, res.Error, name)
		require.Equal(t, schema.ErrKindEvaluateFailed, res.Error.Kind, name)
		require.True(t, strings.Contains(res.Error.Message, c.want), "%s: %s", name, res.Error.Message)
	}
	// A node that failed its own phases is not evaluated.
	task := evalTask("no-eval", `echo 1`, "1", "N=1")
	task.Artifacts.Run.Commands = []string{"exit 2"}
	res, err := e.Execute(context.Background(), task, worker.Slot{Cores: 1})
	require.NoError(t, err)
	require.Equal(t, schema.ErrKindRunFailed, res.Error.Kind)
	require.Nil(t, res.Evaluation)
	require.NoDirExists(t, e.EvaluateDir(task))
}
