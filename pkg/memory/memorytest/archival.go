// The conformance cases of archival memory: order, deduplication, repeats
// across a tree, tags.

package memorytest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/memory"
)

// testArchivalOrder: BM25 ranks a text that matches more, and more densely,
// first.
func testArchivalOrder(t *testing.T, s memory.Store, _ *Clock) {
	fork(t, s, "root", "")
	write(t, s, "root", "loop tiling improves cache reuse in the stencil")
	write(t, s, "root", "the stencil uses OpenMP static scheduling")
	write(t, s, "root", "tiling tiling tiling: tile sizes of 32 work best for tiling the stencil")
	write(t, s, "root", "MPI halo exchange overlaps with compute")
	hits := search(t, s, "root", "tiling")
	require.Equal(t, []string{
		"tiling tiling tiling: tile sizes of 32 work best for tiling the stencil",
		"loop tiling improves cache reuse in the stencil",
	}, texts(hits))
	require.Greater(t, hits[0].BM25, hits[1].BM25)
	require.Greater(t, hits[0].Score, 0.0)
	hits = search(t, s, "root", "stencil tiling")
	require.Len(t, hits, 3)
	require.Equal(t, "MPI halo exchange overlaps with compute", texts(search(t, s, "root", "halo"))[0])
	require.Empty(t, search(t, s, "root", "gpu"))
}

func testArchivalDedup(t *testing.T, s memory.Store, clock *Clock) {
	fork(t, s, "root", "")
	first, dup := write(t, s, "root", "Tile size 32 is best")
	require.False(t, dup)
	require.Equal(t, memory.FactHash("tile  SIZE 32 is best "), first.FactHash)
	fork(t, s, "a", "root")
	fork(t, s, "b", "root")
	clock.Advance(time.Minute)
	again, dup := write(t, s, "a", "  tile size 32   IS BEST")
	if again.Seq != 0 {
		// The store reports what the write did: it must be right.
		require.True(t, dup, "the same fact in a visible scope is stored once")
		require.Equal(t, first.Seq, again.Seq)
		require.Equal(t, 2, again.Count)
		require.Equal(t, clock.Now(), again.LastSeen)
	} else {
		require.False(t, dup, "a write acknowledged before it is applied reports no repeat")
	}
	hits := search(t, s, "a", "tile")
	require.Len(t, hits, 1, "the same fact in a visible scope is stored once")
	require.Equal(t, 2, hits[0].Count)
	require.Equal(t, "root", hits[0].Branch)
	require.Equal(t, clock.Now(), hits[0].LastSeen)
	hits = search(t, s, "b", "tile")
	require.Len(t, hits, 1)
	require.Equal(t, 1, hits[0].Count, "a sibling's repeat does not count in b's scope")
	hits = search(t, s, "root", "tile")
	require.Equal(t, 1, hits[0].Count, "nor in the parent's")
	// A fact first written in a sibling is new here.
	_, dup = write(t, s, "b", "only b knows this")
	require.False(t, dup)
	_, dup = write(t, s, "a", "only b knows this")
	require.False(t, dup)
	for _, br := range []string{"a", "b"} {
		hits = search(t, s, br, "knows")
		require.Len(t, hits, 1)
		require.Equal(t, br, hits[0].Branch, "stored in %s", br)
		require.Equal(t, 1, hits[0].Count)
	}
}

// testRepeatsInATree: a fact repeated many times over a tree (more
// repeats than any scope has branches, as a lesson every node writes
// again) counts, in each branch, the repeats of its scope only: its own,
// and its ancestors' made before the fork on its path; its last seen time
// is the latest of those, also when a repeat carries an earlier time than
// one before it (another host's clock).
func testRepeatsInATree(t *testing.T, s memory.Store, clock *Clock) {
	type repeat struct {
		branch string
		n      int
		at     time.Time
	}
	var (
		repeats []repeat
		n       int
		parent  = map[string]string{}
		forkAt  = map[string]int{}
	)
	fork(t, s, "root", "")
	first, _ := write(t, s, "root", "Tile size 32 is best for the stencil")
	firstAt := clock.Now()
	mk := func(id, p string) {
		fork(t, s, id, p)
		parent[id], forkAt[id] = p, n
	}
	again := func(branch string, d time.Duration) {
		clock.Advance(d)
		write(t, s, branch, "tile size 32 is BEST for the stencil")
		repeats = append(repeats, repeat{branch, n, clock.Now()})
		n++
	}
	for range 3 {
		again("root", time.Minute)
	}
	mk("a", "root")
	again("root", time.Minute) // after a's fork: not a's
	again("a", time.Minute)
	mk("a1", "a")
	for i := range 12 {
		mk(fmt.Sprintf("s%d", i), "a") // a1's siblings: none of theirs counts in a1
		again(fmt.Sprintf("s%d", i), time.Minute)
	}
	again("a1", time.Minute)
	again("a1", -time.Hour) // an earlier clock: the last seen stays the latest
	mk("a2", "a1")
	again("a", time.Minute) // after a1's fork
	again("a2", time.Second)
	mk("b", "root")
	again("b", time.Minute)
	require.Greater(t, len(repeats), 16)

	for _, br := range []string{"root", "a", "a1", "a2", "s0", "s11", "b"} {
		// What br sees: its own repeats, and each ancestor's made before
		// the fork of the branch below it on br's path.
		count, last := 1, firstAt
		for _, r := range repeats {
			visible := r.branch == br
			for cur := br; !visible && parent[cur] != ""; cur = parent[cur] {
				visible = r.branch == parent[cur] && r.n < forkAt[cur]
			}
			if visible {
				count++
				if r.at.After(last) {
					last = r.at
				}
			}
		}
		hits := search(t, s, br, "tile stencil")
		require.Len(t, hits, 1, br)
		require.Equal(t, first.Text, hits[0].Text, br)
		require.Equal(t, "root", hits[0].Branch, br)
		require.Equal(t, count, hits[0].Count, "repeats visible in %s", br)
		require.Equal(t, last, hits[0].LastSeen, "last seen in %s", br)
	}
}

func testArchivalTags(t *testing.T, s memory.Store, _ *Clock) {
	fork(t, s, "root", "")
	write(t, s, "root", "gcc 12 compile output with warnings", "kind:compile_output")
	write(t, s, "root", "gcc flags that worked", "kind:insight", "compiler:gcc")
	require.Len(t, search(t, s, "root", "gcc"), 2)
	require.Equal(t, []string{"gcc flags that worked"}, texts(search(t, s, "root", "gcc", "kind:insight")))
	require.Equal(t, []string{"gcc flags that worked"}, texts(search(t, s, "root", "gcc", "kind:insight", "compiler:gcc")))
	require.Empty(t, search(t, s, "root", "gcc", "kind:insight", "compiler:clang"))
	hits := search(t, s, "root", "warnings")
	require.Equal(t, []string{"kind:compile_output"}, hits[0].Tags)
}
