package worker

import "github.com/hpcq/hpcq/pkg/schema"

// KnowsCancel reports whether the worker has seen a cancel covering run's
// node (cancels reach it through a watch, after CancelRun returns).
func (w *Worker) KnowsCancel(run, node string) bool {
	_, ok := w.cancelOf(&schema.NodeTask{RunID: run, NodeID: node})
	return ok
}

// GPUPlan takes the GPUs of each task in turn on a worker with gpus (no
// task giving any back): the GPUs each got and its share of each, or nil
// for a task that would wait.
func GPUPlan(gpus []string, ts []*schema.NodeTask) (got [][]string, share []float64) {
	r := newResources(nil, 1, gpus, 0)
	for _, t := range ts {
		t.Limits.CPUs = 0
		g, ok := r.take(t, 1<<20)
		if !ok {
			got, share = append(got, nil), append(share, 0)
			continue
		}
		got, share = append(got, g.gpus), append(share, g.share())
	}
	return got, share
}

// GPUsInUse is what the worker's tasks of each pool hold of its GPUs now.
func (w *Worker) GPUsInUse() map[string]float64 { return w.res.gpusInUse() }
