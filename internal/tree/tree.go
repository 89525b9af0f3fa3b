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
	// Q1 and Q3 are the quartiles of the repeats the metric is the median
	// of, when it was measured by repeats (HasSpread): a node is better
	// than another only beyond them (search.Better).
	Q1, Q3    float64 `json:",omitempty"`
	HasSpread bool    `json:",omitempty"`
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

// Better says whether a is better than b: by its metric when neither was
// measured with its noise; else only beyond the noise measured, the rule
// docs/search.md documents: maximizing, a's lower quartile above b's
// metric (b's median), or, when only b was measured by repeats, a's metric
// above b's upper quartile; minimizing, the mirror. A difference inside
// the noise is no difference. (bench-search noise: with this machine's
// timing noise, a wrong best less than half as often as one sample a node;
// a 95% interval instead of the quartiles keeps earlier nodes so often
// that it is wrong more often than one sample.)
func Better(a, b Node, maximize bool) bool {
	switch {
	case !a.HasSpread && !b.HasSpread:
		if maximize {
			return a.Metric > b.Metric
		}
		return a.Metric < b.Metric
	case maximize && a.HasSpread:
		return a.Q1 > b.Metric
	case maximize:
		return a.Metric > b.Q3
	case a.HasSpread:
		return a.Q3 < b.Metric
	}
	return a.Metric < b.Q1
}
