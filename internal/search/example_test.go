package search_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/hpcq/hpcq/internal/search"
)

// Node ids sort in the order they were made, past n9999 too, and before
// ids a search did not make.
func ExampleCompareIDs() {
	ids := []string{"n10000", "t01", "n0002", "n9999", "n0010"}
	slices.SortFunc(ids, search.CompareIDs)
	fmt.Println(ids)
	// Output:
	// [n0002 n0010 n9999 n10000 t01]
}

// How many nodes run at once decides when they run, not what is made: a
// stage drafts num_drafts nodes, debugs the buggy one once they are all
// done, then improves the best.
func ExampleRun() {
	runner := search.RunnerFunc(func(_ context.Context, n *search.Node) (search.Result, error) {
		if n.ID == "n0001" {
			return search.Result{Buggy: true, Reason: "segfault"}, nil
		}
		return search.Result{Metric: float64(len(n.ID)), HasMetric: true}, nil
	})
	p := search.Policy{NumDrafts: 2, DebugProb: 1, MaxDebugDepth: 2, Maximize: true, Rand: rand.New(rand.NewPCG(1, 1))}
	tree := search.NewTree()
	search.Run(context.Background(), tree, p, runner, 8, 5, search.Async)
	for _, n := range tree.Nodes() {
		fmt.Println(n.ID, n.Kind, "from", cmp.Or(n.Parent, "-"))
	}
	// Output:
	// n0001 draft from -
	// n0002 draft from -
	// n0003 debug from n0001
	// n0004 improve from n0002
	// n0005 improve from n0002
}
