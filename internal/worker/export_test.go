package worker

import "github.com/hpcq/hpcq/pkg/schema"

// KnowsCancel reports whether the worker has seen a cancel covering run's
// node (cancels reach it through a watch, after CancelRun returns).
func (w *Worker) KnowsCancel(run, node string) bool {
	_, ok := w.cancelOf(&schema.NodeTask{RunID: run, NodeID: node})
	return ok
}
