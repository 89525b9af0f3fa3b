package tree_test

import (
	"fmt"
	"slices"

	"github.com/hpcq/hpcq/internal/tree"
)

// Node ids sort in the order they were made, past n9999 too, and before
// ids a search did not make.
func ExampleCompareIDs() {
	ids := []string{"n10000", "t01", "n0002", "n9999", "n0010"}
	slices.SortFunc(ids, tree.CompareIDs)
	fmt.Println(ids)
	// Output:
	// [n0002 n0010 n9999 n10000 t01]
}
