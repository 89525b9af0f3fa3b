package sqlite

import (
	"fmt"
	"math/rand/v2"
	"strings"
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

// TestTextIndexMatchesBM25Rank: the index's search over a scope ranks as
// memory.BM25Rank does over the scope's visible texts, on branches small
// (postings in sorted slices) and large (past flatMax, in a map), with
// documents indexed out of seq order (the average length of the visible
// documents once counted some twice then) and some removed, and queries
// with terms no document has. The lazy index (the recall events') is
// searched between additions, so that documents are added to branches
// already indexed, and some are removed before they were indexed.
func TestTextIndexMatchesBM25Rank(t *testing.T) {
	for _, lazy := range []bool{false, true} {
		t.Run(fmt.Sprintf("lazy=%v", lazy), func(t *testing.T) { testTextIndex(t, lazy) })
	}
}

func testTextIndex(t *testing.T, lazy bool) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("tile loop cache vector openmp mpi rank thread block warp fused kernel stride prefetch unroll gflops")
	type doc struct {
		branch string
		text   string
	}
	docs := map[int64]doc{}
	x := newTextIndex[int64]()
	if lazy {
		x = newLazyIndex(func(seq int64) string { return docs[seq].text })
	}
	add := func(seqs []int) {
		for _, s := range seqs {
			seq := int64(s + 1)
			br := "big"
			if seq%5 == 0 {
				br = []string{"a", "b"}[seq%2]
			}
			ws := make([]string, 3+rng.IntN(12))
			for i := range ws {
				ws[i] = words[rng.IntN(len(words))]
				if rng.IntN(4) == 0 {
					ws[i] = strings.ToUpper(ws[i]) + fmt.Sprint(seq%7)
				}
			}
			docs[seq] = doc{br, strings.Join(ws, " ")}
			text := docs[seq].text
			if lazy {
				text = "" // asked of textOf
			}
			x.add(seq, br, text, nil, seq)
		}
	}

	check := func() {
		t.Helper()
		for range 50 {
			sc := []scopeEntry{{Branch: "a", MaxSeq: int64(rng.IntN(1600))}, {Branch: "big", MaxSeq: int64(rng.IntN(1600))}}
			if rng.IntN(2) == 0 {
				sc = append(sc, scopeEntry{Branch: "b", MaxSeq: 2100})
			}
			query := words[rng.IntN(len(words))] + " " + strings.ToUpper(words[rng.IntN(len(words))]) + fmt.Sprint(rng.IntN(7))
			switch rng.IntN(6) {
			case 0: // a term no document has, beside known ones
				query += " neverindexed"
			case 1: // only such terms
				query = "neverindexed nor-this"
			}
			var texts []string
			var vis []int64
			for seq, d := range docs {
				for _, e := range sc {
					if e.Branch == d.branch && seq <= e.MaxSeq {
						texts = append(texts, d.text)
						vis = append(vis, seq)
						break
					}
				}
			}
			if lazy && !x.scopeIndexed(sc) {
				x.indexScope(sc)
			}
			require.True(t, x.scopeIndexed(sc))
			got := x.search(sc, query, nil, 10)
			idx, scores := memory.BM25Rank(texts, vis, query, 10)
			require.Len(t, got, len(idx), query)
			for i := range idx {
				require.Equal(t, vis[idx[i]], got[i].seq, "%s: rank %d", query, i)
				require.InDelta(t, scores[i], got[i].bm25, 1e-9)
			}
		}
	}
	perm := rng.Perm(1500)
	add(perm[:1000])
	if lazy {
		require.Nil(t, x.branches["big"].postings, "nothing indexed before a search")
		require.NotEmpty(t, x.branches["big"].pending)
	}
	check()
	require.NotNil(t, x.branches["big"].postings, "the big branch moved to a map")
	require.Nil(t, x.branches["a"].postings, "a small branch keeps its sorted slices")
	add(perm[1000:])
	check()
	for seq := int64(1); seq <= 1500; seq += 3 {
		x.remove(seq)
		delete(docs, seq)
	}
	check()
	if lazy { // removed while pending: never indexed
		for i := range 10 {
			seq := int64(2000 + i)
			docs[seq] = doc{"b", "tile loop removed"}
			x.add(seq, "b", "", nil, seq)
		}
		x.remove(2003)
		delete(docs, 2003)
		require.Len(t, x.branches["b"].pending, 9)
		check()
		// An indexed document removed while another is pending, then the
		// pending one: nothing left to index, the lengths counted again.
		docs[2050] = doc{"b", "tile tile pending"}
		x.add(2050, "b", "", nil, 2050)
		for _, seq := range []int64{5, 2050} {
			x.remove(seq)
			delete(docs, seq)
		}
		require.Empty(t, x.branches["b"].pending)
		check()
	}
}
