// The run phase measured without an evaluator: a warm-up, then the
// task's repeats, the run's metric read from each (NodeTask.Measure).

package executor

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/hpcq/hpcq/internal/evaluate"
	"github.com/hpcq/hpcq/pkg/schema"
)

// measureInput names the one "input" of a measured run phase in its
// samples (the program chose its own).
const measureInput = "run"

// measuredRun runs the run phase once as a warm-up, then t.Measure.Repeats
// times, each run's metrics read from its output and from a metrics.json
// it wrote (one left by an earlier run is not read again). The last run is
// the phase as the result and the recall events tell it, its metrics met's
// (collect reads them); the samples of the run's metric, the warm-up's as
// repeat 0, are returned for measured. A run that fails ends the phase
// with its error, as a single run would.
func (e *Executor) measuredRun(ctx context.Context, t *schema.NodeTask, ph phaseSpec, run phaseRun, log *os.File, met *metrics,
	res *schema.NodeResult, rec *recorder) (*schema.ResultError, []schema.EvalSample, error) {
	var samples []schema.EvalSample
	file := metricsFile{ws: run.ws}
	n := t.Measure.Repeats
	for i := 0; i <= n; i++ {
		m := met
		if i < n {
			var err error
			if m, err = newMetrics(t.Artifacts.Run.MetricPatterns); err != nil {
				return nil, nil, err
			}
		}
		fmt.Fprintf(log, "# hpcq: run %d of %d (%s)\n", i+1, n+1, map[bool]string{true: "warm-up", false: "measured"}[i == 0])
		file.before()
		if i == n {
			rerr, err := e.commandsPhase(ctx, ph, run, log, m, res, rec)
			if err != nil || rerr != nil {
				return rerr, nil, err
			}
		} else {
			pr, rerr, err := e.runPhase(ctx, ph, run, log, nil, m.stdoutLine)
			if err != nil {
				return nil, nil, err
			}
			if rerr != nil {
				res.Phases = append(res.Phases, pr)
				rec.phaseEnded(pr, rerr)
				rerr.Message = fmt.Sprintf("run %d of %d: %s", i+1, n+1, rerr.Message)
				return rerr, nil, nil
			}
		}
		if i == n {
			break // collect reads the last run's metrics.json into met
		}
		if data := file.after(); data != nil {
			m.file(data)
		}
		values, units, _ := m.finish()
		if v, ok := values[t.Measure.Metric]; ok {
			samples = append(samples, schema.EvalSample{Input: measureInput, Repeat: i, Correct: true, Metric: &v, Unit: units[t.Measure.Metric]})
		}
	}
	return nil, samples, nil
}

// measured makes the run phase's repeats the result's evaluation (stage
// EvalRun), once collect has read the last run's metrics: the median of
// the run's metric over the measured runs, its spread, every sample. Only
// when every run reported the metric and the task's phases ended well.
func measured(t *schema.NodeTask, res *schema.NodeResult, samples []schema.EvalSample, start time.Time) {
	if res.Error != nil {
		return
	}
	v, ok := res.Metrics[t.Measure.Metric]
	if !ok {
		return
	}
	samples = append(samples, schema.EvalSample{Input: measureInput, Repeat: t.Measure.Repeats, Correct: true, Metric: &v,
		Unit: res.MetricUnits[t.Measure.Metric]})
	if len(samples) != t.Measure.Repeats+1 {
		return // a run that did not report it: the last run's value stands, alone
	}
	verdict := evaluate.Judge(samples, []string{measureInput})
	if !verdict.Correct {
		return
	}
	m := verdict.Metric
	res.Evaluation = &schema.Evaluation{Stage: schema.EvalRun, Samples: samples, Correct: true, Metric: &m, Unit: verdict.Unit,
		Spread: verdict.Spread, DurationMS: time.Since(start).Milliseconds()}
}

// metricsFile is the workspace's metrics.json as each run leaves it: read
// only when the run wrote it (its modification time or size changed).
type metricsFile struct {
	ws   string
	last os.FileInfo
}

func (f *metricsFile) before() {
	f.last = nil
	if root, err := os.OpenRoot(f.ws); err == nil {
		f.last, _ = root.Stat("metrics.json")
		root.Close()
	}
}

func (f *metricsFile) after() []byte {
	root, err := os.OpenRoot(f.ws)
	if err != nil {
		return nil
	}
	defer root.Close()
	fi, err := root.Stat("metrics.json")
	if err != nil || f.last != nil && fi.ModTime().Equal(f.last.ModTime()) && fi.Size() == f.last.Size() {
		return nil
	}
	data, err := readSmall(root, "metrics.json", 1<<20)
	if err != nil {
		return nil
	}
	return data
}
