package sqlite

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/memory"
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

// TestFindFact: the visible copy of a fact is the latest of the nearest
// scope branch that has one within its bound; other facts, branches out
// of the scope and copies past a bound (written after a fork) are not
// seen, and a removed copy is gone.
func TestFindFact(t *testing.T) {
	x := newArchIndex()
	item := func(seq int64, branch, fact string) {
		x.addItem(memory.ArchivalItem{Seq: seq, Branch: branch, Text: fact + " text", FactHash: fact})
	}
	item(5, "root", "f")
	item(9, "root", "f")
	item(3, "a", "f")
	item(7, "a", "f")
	item(12, "a", "f") // after b forked from a at 10
	item(4, "a", "g")
	item(6, "sib", "f")
	find := func(sc []scopeEntry, fact string) int64 {
		it, ok := x.findFact(sc, fact)
		if !ok {
			return 0
		}
		require.Equal(t, fact, it.FactHash)
		return it.Seq
	}
	b := []scopeEntry{{Branch: "b", MaxSeq: 100}, {Branch: "a", MaxSeq: 10}, {Branch: "root", MaxSeq: 2}}
	require.EqualValues(t, 7, find(b, "f"), "a's latest copy before the fork, nearer than root's")
	require.EqualValues(t, 4, find(b, "g"))
	require.EqualValues(t, 0, find(b, "h"))
	require.EqualValues(t, 12, find([]scopeEntry{{Branch: "a", MaxSeq: 100}}, "f"))
	require.EqualValues(t, 5, find([]scopeEntry{{Branch: "c", MaxSeq: 100}, {Branch: "root", MaxSeq: 6}}, "f"), "root's copy within the bound")
	require.EqualValues(t, 0, find([]scopeEntry{{Branch: "a", MaxSeq: 2}, {Branch: "root", MaxSeq: 4}}, "f"), "every copy past its bound")
	x.removeItems([]int64{7, 3})
	require.EqualValues(t, 9, find([]scopeEntry{{Branch: "a", MaxSeq: 10}, {Branch: "root", MaxSeq: 100}}, "f"), "a's copies removed")
	x.removeItems([]int64{4})
	require.EqualValues(t, 0, find(b, "g"))
}
