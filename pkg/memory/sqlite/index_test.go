package sqlite

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRepeatCounts: a document's repeats count in a scope when their
// branch is in it up to its bound, once each, whatever order they were
// recorded in; last seen is the latest of those counted.
func TestRepeatCounts(t *testing.T) {
	x := newArchIndex()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	x.addHit(1, 10, "a", at(10))
	x.addHit(1, 30, "a", at(30))
	x.addHit(1, 20, "a", at(20)) // out of order
	x.addHit(1, 20, "a", at(20)) // again: once
	x.addHit(1, 15, "b", at(50)) // a clock that went back for a later seq of another branch
	x.addHit(1, 40, "c", at(40))
	x.addHit(2, 11, "a", at(11))

	cases := []struct {
		sc   []scopeEntry
		n    int
		last time.Time
	}{
		{nil, 1, t0},
		{[]scopeEntry{{Branch: "a", MaxSeq: 25}}, 3, at(20)},
		{[]scopeEntry{{Branch: "a", MaxSeq: 100}}, 4, at(30)},
		{[]scopeEntry{{Branch: "a", MaxSeq: 9}}, 1, t0},
		{[]scopeEntry{{Branch: "c", MaxSeq: 100}, {Branch: "a", MaxSeq: 10}}, 3, at(40)},
		{[]scopeEntry{{Branch: "b", MaxSeq: 15}, {Branch: "a", MaxSeq: 30}}, 5, at(50)},
		// A branch named twice: a repeat counts once, under the larger bound.
		{[]scopeEntry{{Branch: "a", MaxSeq: 10}, {Branch: "a", MaxSeq: 20}}, 3, at(20)},
		{[]scopeEntry{{Branch: "z", MaxSeq: 100}}, 1, t0},
	}
	for i, c := range cases {
		n, last := x.countsOf(c.sc, 1, t0)
		require.Equal(t, c.n, n, "case %d", i)
		require.Equal(t, c.last, last, "case %d", i)
	}
	n, _ := x.countsOf([]scopeEntry{{Branch: "a", MaxSeq: 100}}, 2, t0)
	require.Equal(t, 2, n)
	n, _ = x.countsOf([]scopeEntry{{Branch: "a", MaxSeq: 100}}, 3, t0)
	require.Equal(t, 1, n, "a document never repeated")
}
