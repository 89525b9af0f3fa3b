package search_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/hpcq/hpcq/internal/search"
	"github.com/hpcq/hpcq/internal/tree"
)

// How many nodes run at once decides when they run, not what is made: a
// stage drafts num_drafts nodes, debugs the buggy one once they are all
// done, then improves the best.
func ExampleRun() {
	runner := search.RunnerFunc(func(_ context.Context, n *tree.Node) (search.Result, error) {
		if n.ID == "n0001" {
			return search.Result{Buggy: true, Reason: "segfault"}, nil
		}
		return search.Result{Metric: float64(len(n.ID)), HasMetric: true}, nil
	})
	p := search.Policy{NumDrafts: 2, DebugProb: 1, MaxDebugDepth: 2, Maximize: true, Rand: rand.New(rand.NewPCG(1, 1))}
	tr := search.NewTree()
	search.Run(context.Background(), tr, p, runner, 8, 5, search.Async)
	for _, n := range tr.Nodes() {
		fmt.Println(n.ID, n.Kind, "from", cmp.Or(n.Parent, "-"))
	}
	// Output:
	// n0001 draft from -
	// n0002 draft from -
	// n0003 debug from n0001
	// n0004 improve from n0002
	// n0005 improve from n0002
}
