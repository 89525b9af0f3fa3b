// Package tree is a run's experiment tree as its journal records it: the
// node, the order of node ids, the journal's records, and a follower that
// reads the journal as the search appends to it (the dashboard, `scheduler
// ls`). It holds no policy: internal/search grows the tree and writes the
// journal; readers of a run directory (internal/runview) read it through
// here without linking the search.
package tree

import (
	"cmp"
	"strings"
	"time"
)

// Node is one experiment of the tree.
type Node struct {
	ID     string
	Parent string
	Kind   string
	// Stage is 1 to 4 (0 in a search without stages, treated as 1).
	Stage int
	Depth int // debug depth: consecutive debug nodes up to this one
	// Set when the node has run.
	Done   bool
	Buggy  bool
	Reason string
	// NotRun: the node failed before it could run (no code to debug).
	NotRun    bool
	Metric    float64
	HasMetric bool
	Started   time.Time
	Finished  time.Time
}

// CompareIDs orders node ids as they were made: n9999 before n10000 (a
// tree search's ids are "n" and a number), those before any other ids,
// which are in string order.
func CompareIDs(a, b string) int {
	da, db := digitsAfterN(a), digitsAfterN(b)
	switch {
	case da && db:
		na, nb := strings.TrimLeft(a[1:], "0"), strings.TrimLeft(b[1:], "0")
		return cmp.Or(cmp.Compare(len(na), len(nb)), strings.Compare(na, nb), strings.Compare(a, b))
	case da:
		return -1
	case db:
		return 1
	}
	return strings.Compare(a, b)
}

// digitsAfterN reports whether id is "n" followed by digits only.
func digitsAfterN(id string) bool {
	if len(id) < 2 || id[0] != 'n' {
		return false
	}
	for i := 1; i < len(id); i++ {
		if id[i] < '0' || id[i] > '9' {
			return false
		}
	}
	return true
}
