package scheduler

import (
	"context"
	"fmt"

	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/search"
)

// SearchRunner runs the nodes of a tree search as queue tasks: Build turns
// a node into its task (the LLM's artifacts, in the run command), the
// dispatcher publishes it and waits for its outcome. A dead-lettered task
// is a buggy node with the dead letter's reason.
type SearchRunner struct {
	D     *Dispatcher
	Build func(ctx context.Context, n *search.Node) (*queue.NodeTask, error)
	// Metric names the metric the search optimizes.
	Metric string
}

// Run implements search.Runner.
func (r SearchRunner) Run(ctx context.Context, n *search.Node) (search.Result, error) {
	t, err := r.Build(ctx, n)
	if err != nil {
		return search.Result{Buggy: true, Reason: err.Error()}, nil
	}
	ch, err := r.D.Submit(ctx, t)
	if err != nil {
		return search.Result{}, err
	}
	var o Outcome
	select {
	case o = <-ch:
	case <-ctx.Done():
		return search.Result{}, ctx.Err()
	}
	switch {
	case o.DeadLetter != nil:
		return search.Result{Buggy: true, Reason: "dead-lettered: " + o.DeadLetter.Reason}, nil
	case o.Result.Error != nil:
		e := o.Result.Error
		return search.Result{Buggy: true, Reason: fmt.Sprintf("%s in %s: %s", e.Kind, e.Phase, e.Message)}, nil
	}
	v, ok := o.Result.Metrics[r.Metric]
	if !ok {
		return search.Result{Buggy: true, Reason: fmt.Sprintf("the run reported no %q metric", r.Metric)}, nil
	}
	return search.Result{Metric: v, HasMetric: true}, nil
}
