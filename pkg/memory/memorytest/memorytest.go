// Package memorytest is the conformance suite of memory.Store: every
// backend runs Exercise against a fresh store per case.
package memorytest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/memory"
)

// Clock is an injectable clock for TTL and recency.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock starts at a fixed instant.
func NewClock() *Clock { return &Clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

// Now is the current instant.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// NewStore opens a fresh, empty store using clock.
type NewStore func(t *testing.T, clock *Clock) memory.Store

// Exercise runs every conformance case.
func Exercise(t *testing.T, newStore NewStore) {
	cases := []struct {
		name string
		fn   func(t *testing.T, s memory.Store, clock *Clock)
	}{
		{"Forks", testForks},
		{"SnapshotAtFork", testSnapshotAtFork},
		{"SiblingIsolation", testSiblingIsolation},
		{"NearestCoreWins", testNearestCoreWins},
		{"Tombstones", testTombstones},
		{"TTL", testTTL},
		{"RecallWindowAndSummary", testRecall},
		{"ViewAndUnfolded", testView},
		{"RecallSearch", testRecallSearch},
		{"ArchivalBM25Order", testArchivalOrder},
		{"ArchivalDedup", testArchivalDedup},
		{"ArchivalRepeatsInATree", testRepeatsInATree},
		{"ArchivalTags", testArchivalTags},
		{"RankConfidenceAndDecay", testRankConfidenceAndDecay},
		{"ConcurrentWriters", testConcurrent},
		{"ApplyAtomic", testApply},
		{"Invalid", testInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clock := NewClock()
			s := newStore(t, clock)
			t.Cleanup(func() { _ = s.Close() })
			c.fn(t, s, clock)
		})
	}
	t.Run("Model", func(t *testing.T) { ExerciseModel(t, newStore) })
	t.Run("DecayAndConsolidation", func(t *testing.T) {
		t.Parallel()
		exerciseDecay(t, newStore)
	})
}

func fork(t *testing.T, s memory.Store, id, parent string) memory.Branch {
	t.Helper()
	b, err := s.Fork(context.Background(), memory.ForkParams{Branch: id, Parent: parent})
	require.NoError(t, err)
	return b
}

func set(t *testing.T, s memory.Store, branch, key, value string) {
	t.Helper()
	_, err := s.CoreSet(context.Background(), memory.CoreSetParams{Branch: branch, Key: key, Value: value})
	require.NoError(t, err)
}

func get(t *testing.T, s memory.Store, branch, key string) (string, bool) {
	t.Helper()
	e, ok, err := s.CoreGet(context.Background(), memory.CoreKeyParams{Branch: branch, Key: key})
	require.NoError(t, err)
	return e.Value, ok
}

func events(t *testing.T, s memory.Store, branch string) []string {
	t.Helper()
	evs, _, err := s.RecallList(context.Background(), memory.RecallListParams{Branch: branch})
	require.NoError(t, err)
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Payload
	}
	return out
}

func appendEvent(t *testing.T, s memory.Store, branch, payload string) {
	t.Helper()
	_, err := s.RecallAppend(context.Background(), memory.RecallAppendParams{Branch: branch,
		Event: memory.RecallEvent{Kind: "node_result", NodeID: branch, Payload: payload}})
	require.NoError(t, err)
}

func write(t *testing.T, s memory.Store, branch, text string, tags ...string) (memory.ArchivalItem, bool) {
	t.Helper()
	it, dup, err := s.ArchivalWrite(context.Background(), memory.ArchivalWriteParams{Branch: branch, Text: text, Tags: tags})
	require.NoError(t, err)
	return it, dup
}

func search(t *testing.T, s memory.Store, branch, q string, tags ...string) []memory.ArchivalItem {
	t.Helper()
	hits, err := s.ArchivalSearch(context.Background(), memory.ArchivalSearchParams{Branch: branch, Query: q, Tags: tags, K: 8})
	require.NoError(t, err)
	return hits
}

func texts(items []memory.ArchivalItem) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Text
	}
	return out
}

func testForks(t *testing.T, s memory.Store, _ *Clock) {
	ctx := context.Background()
	root := fork(t, s, "root", "")
	require.Equal(t, 0, root.Depth)
	child := fork(t, s, "child", "root")
	require.Equal(t, 1, child.Depth)
	require.Equal(t, "root", child.Parent)
	require.Greater(t, child.ForkSeq, root.ForkSeq)
	got, err := s.BranchGet(ctx, "child")
	require.NoError(t, err)
	require.Equal(t, child.ForkSeq, got.ForkSeq)
	_, err = s.Fork(ctx, memory.ForkParams{Branch: "child", Parent: "root"})
	require.ErrorIs(t, err, memory.ErrBranchExists)
	_, err = s.Fork(ctx, memory.ForkParams{Branch: "orphan", Parent: "nope"})
	require.ErrorIs(t, err, memory.ErrNoBranch)
	_, err = s.BranchGet(ctx, "nope")
	require.ErrorIs(t, err, memory.ErrNoBranch)
	_, _, err = s.CoreGet(ctx, memory.CoreKeyParams{Branch: "nope", Key: "k"})
	require.ErrorIs(t, err, memory.ErrNoBranch)
}

// testSnapshotAtFork: a child sees its parent's writes made before the
// fork, in all three tiers, and none made after.
func testSnapshotAtFork(t *testing.T, s memory.Store, _ *Clock) {
	fork(t, s, "root", "")
	set(t, s, "root", "before", "1")
	appendEvent(t, s, "root", "event before")
	write(t, s, "root", "archived before the fork about stencils")
	fork(t, s, "child", "root")
	set(t, s, "root", "after", "2")
	set(t, s, "root", "before", "changed after the fork")
	appendEvent(t, s, "root", "event after")
	write(t, s, "root", "archived after the fork about stencils")

	v, ok := get(t, s, "child", "before")
	require.True(t, ok)
	require.Equal(t, "1", v, "the parent's later write is invisible to the child")
	_, ok = get(t, s, "child", "after")
	require.False(t, ok)
	require.Equal(t, []string{"event before"}, events(t, s, "child"))
	require.Equal(t, []string{"archived before the fork about stencils"}, texts(search(t, s, "child", "stencils")))

	// And the parent sees its own writes, not the child's.
	set(t, s, "child", "mine", "c")
	_, ok = get(t, s, "root", "mine")
	require.False(t, ok)
	require.Equal(t, []string{"event before", "event after"}, events(t, s, "root"))

	// A grandchild forked from the child sees the root only up to the
	// child's fork.
	fork(t, s, "grandchild", "child")
	v, _ = get(t, s, "grandchild", "before")
	require.Equal(t, "1", v)
	v, _ = get(t, s, "grandchild", "mine")
	require.Equal(t, "c", v)
}

func testSiblingIsolation(t *testing.T, s memory.Store, _ *Clock) {
	fork(t, s, "root", "")
	fork(t, s, "a", "root")
	fork(t, s, "b", "root")
	set(t, s, "a", "k", "from a")
	appendEvent(t, s, "a", "a did something")
	write(t, s, "a", "a learned that tiling helps")
	_, ok := get(t, s, "b", "k")
	require.False(t, ok)
	require.Empty(t, events(t, s, "b"))
	require.Empty(t, search(t, s, "b", "tiling"))
	list, err := s.CoreList(context.Background(), memory.CoreListParams{Branch: "b"})
	require.NoError(t, err)
	require.Empty(t, list)
	hits, err := s.RecallSearch(context.Background(), memory.RecallSearchParams{Branch: "b", Query: "something"})
	require.NoError(t, err)
	require.Empty(t, hits)
}

func testNearestCoreWins(t *testing.T, s memory.Store, clock *Clock) {
	fork(t, s, "root", "")
	set(t, s, "root", "flags", "-O2")
	fork(t, s, "child", "root")
	clock.Advance(time.Hour)
	set(t, s, "child", "flags", "-O3")
	clock.Advance(time.Hour)
	set(t, s, "root", "flags", "-O1 (later, in the parent)")
	v, _ := get(t, s, "child", "flags")
	require.Equal(t, "-O3", v, "the branch's own write wins over any ancestor's")
	v, _ = get(t, s, "root", "flags")
	require.Equal(t, "-O1 (later, in the parent)", v)
	set(t, s, "child", "flags", "-O3 -march=native")
	e, ok, err := s.CoreGet(context.Background(), memory.CoreKeyParams{Branch: "child", Key: "flags"})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "-O3 -march=native", e.Value)
	require.Equal(t, "child", e.Branch)
	require.Equal(t, 3, e.Importance, "default importance")

	fork(t, s, "gc", "child")
	list, err := s.CoreList(context.Background(), memory.CoreListParams{Branch: "gc"})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "-O3 -march=native", list[0].Value)
}

func testTombstones(t *testing.T, s memory.Store, _ *Clock) {
	ctx := context.Background()
	fork(t, s, "root", "")
	set(t, s, "root", "k", "v")
	fork(t, s, "child", "root")
	require.NoError(t, s.CoreDelete(ctx, memory.CoreKeyParams{Branch: "child", Key: "k"}))
	_, ok := get(t, s, "child", "k")
	require.False(t, ok, "a tombstone hides the ancestor's value")
	v, ok := get(t, s, "root", "k")
	require.True(t, ok)
	require.Equal(t, "v", v, "the child's delete does not reach the parent")
	set(t, s, "child", "k", "again")
	v, _ = get(t, s, "child", "k")
	require.Equal(t, "again", v)
}

func testTTL(t *testing.T, s memory.Store, clock *Clock) {
	ctx := context.Background()
	fork(t, s, "root", "")
	_, err := s.CoreSet(ctx, memory.CoreSetParams{Branch: "root", Key: "lease", Value: "x", TTL: time.Minute})
	require.NoError(t, err)
	e, ok, err := s.CoreGet(ctx, memory.CoreKeyParams{Branch: "root", Key: "lease"})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, clock.Now().Add(time.Minute), e.Expires)
	clock.Advance(59 * time.Second)
	_, ok = get(t, s, "root", "lease")
	require.True(t, ok)
	clock.Advance(2 * time.Second)
	_, ok = get(t, s, "root", "lease")
	require.False(t, ok, "expired")
}

func testRecall(t *testing.T, s memory.Store, _ *Clock) {
	ctx := context.Background()
	fork(t, s, "root", "")
	for i := range 5 {
		appendEvent(t, s, "root", fmt.Sprintf("e%d", i))
	}
	evs, total, err := s.RecallList(ctx, memory.RecallListParams{Branch: "root", Limit: 2, Newest: true, Total: true})
	require.NoError(t, err)
	require.Equal(t, 5, total)
	require.Equal(t, "e3", evs[0].Payload)
	_, total, err = s.RecallList(ctx, memory.RecallListParams{Branch: "root", Limit: 2, Newest: true})
	require.NoError(t, err)
	require.Zero(t, total, "no count unless asked")
	require.Equal(t, "e4", evs[1].Payload)
	oldest, total, err := s.RecallList(ctx, memory.RecallListParams{Branch: "root", AfterSeq: evs[0].Seq - 1, Limit: 1, Total: true})
	require.NoError(t, err)
	require.Equal(t, 2, total)
	require.Equal(t, "e3", oldest[0].Payload)

	// Summaries are versioned like everything else: a child keeps the one
	// of its fork.
	require.NoError(t, s.RecallSummarySet(ctx, memory.RecallSummarySetParams{Branch: "root", Summary: memory.RecallSummary{Text: "s1", FoldedSeq: 3}}))
	fork(t, s, "child", "root")
	require.NoError(t, s.RecallSummarySet(ctx, memory.RecallSummarySetParams{Branch: "root", Summary: memory.RecallSummary{Text: "s2", FoldedSeq: 4}}))
	sum, err := s.RecallSummaryGet(ctx, "child")
	require.NoError(t, err)
	require.Equal(t, memory.RecallSummary{Text: "s1", FoldedSeq: 3}, sum)
	sum, err = s.RecallSummaryGet(ctx, "root")
	require.NoError(t, err)
	require.Equal(t, "s2", sum.Text)
	fork(t, s, "empty", "")
	sum, err = s.RecallSummaryGet(ctx, "empty")
	require.NoError(t, err)
	require.Equal(t, memory.RecallSummary{}, sum)
}

// testView checks that a store's View (ReadView, direct and through an
// OutageStore) returns what CoreList, RecallSummaryGet and RecallList give,
// and RecallUnfolded what RecallSummaryGet and RecallList's Total give, in a
// tree with writes after its forks, a tombstone and summaries.
//
// Long: one conformance scenario, its steps and assertions in order.
func testView(t *testing.T, s memory.Store, clock *Clock) {
	ctx := context.Background()
	fork(t, s, "root", "")
	set(t, s, "root", "A", "a0")
	set(t, s, "root", "B", "b0")
	_, err := s.CoreSet(ctx, memory.CoreSetParams{Branch: "root", Key: "T", Value: "short-lived", TTL: time.Minute})
	require.NoError(t, err)
	for i := range 4 {
		appendEvent(t, s, "root", fmt.Sprintf("r%d", i))
	}
	seqOf := func(branch string, i int) int64 { // the seq of the branch's i-th visible event
		t.Helper()
		evs, _, err := s.RecallList(ctx, memory.RecallListParams{Branch: branch})
		require.NoError(t, err)
		return evs[i].Seq
	}
	require.NoError(t, s.RecallSummarySet(ctx, memory.RecallSummarySetParams{Branch: "root", Summary: memory.RecallSummary{Text: "root so far", FoldedSeq: seqOf("root", 1)}}))
	fork(t, s, "child", "root")
	fork(t, s, "empty", "")
	set(t, s, "root", "A", "a1") // after the fork: not the child's
	appendEvent(t, s, "root", "r4")
	require.NoError(t, s.CoreDelete(ctx, memory.CoreKeyParams{Branch: "child", Key: "B"}))
	set(t, s, "child", "C", "c0")
	for i := range 3 {
		appendEvent(t, s, "child", fmt.Sprintf("c%d", i))
	}
	fork(t, s, "grandchild", "child")
	require.NoError(t, s.RecallSummarySet(ctx, memory.RecallSummarySetParams{Branch: "grandchild", Summary: memory.RecallSummary{Text: "own", FoldedSeq: seqOf("grandchild", 6)}}))
	appendEvent(t, s, "grandchild", "g0")
	clock.Advance(2 * time.Minute) // T expires

	wrapped := memory.NewOutageStore(s, memory.OutageOptions{})
	for _, b := range []string{"root", "child", "grandchild", "empty"} {
		sum, err := s.RecallSummaryGet(ctx, b)
		require.NoError(t, err)
		_, total, err := s.RecallList(ctx, memory.RecallListParams{Branch: b, AfterSeq: sum.FoldedSeq, Total: true})
		require.NoError(t, err)
		for _, limit := range []int{0, 1, 2, 3, 4, 100} {
			for name, from := range map[string]memory.Store{"store": s, "outage store": wrapped} {
				gotSum, n, err := from.RecallUnfolded(ctx, b, limit)
				require.NoError(t, err, "%s %s %d", name, b, limit)
				require.Equal(t, sum, gotSum, "%s %s %d", name, b, limit)
				require.Equal(t, min(total, limit), n, "%s %s %d: unfolded events counted up to the limit", name, b, limit)
			}
		}
		for _, n := range []int{0, 1, 3, 100} {
			for _, core := range []bool{false, true} {
				p := memory.ViewParams{Branch: b, Events: n, Core: core}
				var want memory.View
				if core {
					want.Core, err = s.CoreList(ctx, memory.CoreListParams{Branch: b})
					require.NoError(t, err)
				}
				want.Summary, err = s.RecallSummaryGet(ctx, b)
				require.NoError(t, err)
				want.Events, _, err = s.RecallList(ctx, memory.RecallListParams{Branch: b, Limit: n, Newest: true})
				require.NoError(t, err)
				for name, from := range map[string]memory.Store{"store": s, "outage store": wrapped} {
					got, err := memory.ReadView(ctx, from, p)
					require.NoError(t, err, "%s %+v", name, p)
					require.Equal(t, want, got, "%s %+v", name, p)
				}
			}
		}
	}
	v, err := memory.ReadView(ctx, s, memory.ViewParams{Branch: "child", Events: 2, Core: true})
	require.NoError(t, err)
	keys := make([]string, len(v.Core))
	for i, e := range v.Core {
		keys[i] = e.Key + "=" + e.Value
	}
	require.Equal(t, []string{"A=a0", "C=c0"}, keys, "the fork's A, B deleted, T expired")
	require.Equal(t, "root so far", v.Summary.Text)
	require.Equal(t, []string{"c1", "c2"}, []string{v.Events[0].Payload, v.Events[1].Payload})

	_, n, err := s.RecallUnfolded(ctx, "grandchild", 100)
	require.NoError(t, err)
	require.Equal(t, 1, n, "g0 only: the grandchild's own summary folded up to its fork")
	_, n, err = s.RecallUnfolded(ctx, "child", 100)
	require.NoError(t, err)
	require.Equal(t, 5, n, "r2, r3 and c0-c2 after the summary of the fork")

	_, err = memory.ReadView(ctx, s, memory.ViewParams{Branch: "nope"})
	require.ErrorIs(t, err, memory.ErrNoBranch)
	_, _, err = s.RecallUnfolded(ctx, "nope", 1)
	require.ErrorIs(t, err, memory.ErrNoBranch)
}

func testRecallSearch(t *testing.T, s memory.Store, _ *Clock) {
	ctx := context.Background()
	fork(t, s, "root", "")
	appendEvent(t, s, "root", "compile failed: undefined reference to omp_get_wtime")
	appendEvent(t, s, "root", "run ok: 12 GFLOP/s")
	fork(t, s, "child", "root")
	appendEvent(t, s, "child", "added -fopenmp, compile ok")
	appendEvent(t, s, "root", "compile retried in root after the fork")
	hits, err := s.RecallSearch(ctx, memory.RecallSearchParams{Branch: "child", Query: "compile"})
	require.NoError(t, err)
	var got []string
	for _, h := range hits {
		got = append(got, h.Payload)
	}
	sort.Strings(got)
	require.Equal(t, []string{"added -fopenmp, compile ok", "compile failed: undefined reference to omp_get_wtime"}, got)
	hits, err = s.RecallSearch(ctx, memory.RecallSearchParams{Branch: "child", Query: `"; DROP TABLE recall; --`})
	require.NoError(t, err, "search text is only ever tokenized, never run as a query")
	require.Empty(t, hits)
}

// testConcurrent: several goroutines write to several branches at once;
// every acknowledged write is there.
func testConcurrent(t *testing.T, s memory.Store, _ *Clock) {
	ctx := context.Background()
	fork(t, s, "root", "")
	const branches, writes = 4, 25
	for b := range branches {
		fork(t, s, fmt.Sprintf("b%d", b), "root")
	}
	var wg sync.WaitGroup
	errs := make(chan error, branches*3)
	for b := range branches {
		for kind := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				br := fmt.Sprintf("b%d", b)
				for i := range writes {
					var err error
					switch kind {
					case 0:
						_, err = s.CoreSet(ctx, memory.CoreSetParams{Branch: br, Key: fmt.Sprintf("k%d", i), Value: "v"})
					case 1:
						_, err = s.RecallAppend(ctx, memory.RecallAppendParams{Branch: br, Event: memory.RecallEvent{Kind: "run_ok", Payload: fmt.Sprint(i)}})
					case 2:
						_, _, err = s.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: br, Text: fmt.Sprintf("fact %d of %s", i, br)})
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for b := range branches {
		br := fmt.Sprintf("b%d", b)
		list, err := s.CoreList(ctx, memory.CoreListParams{Branch: br})
		require.NoError(t, err)
		require.Len(t, list, writes)
		_, total, err := s.RecallList(ctx, memory.RecallListParams{Branch: br, Total: true})
		require.NoError(t, err)
		require.Equal(t, writes, total)
		hits, err := s.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: br, Query: "fact", K: 1000})
		require.NoError(t, err)
		require.Len(t, hits, writes)
	}
}

func testInvalid(t *testing.T, s memory.Store, _ *Clock) {
	ctx := context.Background()
	fork(t, s, "root", "")
	_, err := s.CoreSet(ctx, memory.CoreSetParams{Branch: "root", Key: "k", Importance: 9})
	require.ErrorIs(t, err, memory.ErrInvalid)
	require.ErrorContains(t, err, "importance 9")
	_, err = s.CoreSet(ctx, memory.CoreSetParams{Branch: "root"})
	require.ErrorIs(t, err, memory.ErrInvalid)
	_, _, err = s.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: "root", Text: "  "})
	require.ErrorIs(t, err, memory.ErrInvalid)
	_, err = s.RecallAppend(ctx, memory.RecallAppendParams{Branch: "root"})
	require.ErrorIs(t, err, memory.ErrInvalid)
	_, err = s.Fork(ctx, memory.ForkParams{})
	require.ErrorIs(t, err, memory.ErrInvalid)
}

// testApply: a batch lands whole (a fact repeated inside it is stored
// once), and a batch with an invalid write lands not at all.
func testApply(t *testing.T, s memory.Store, _ *Clock) {
	ctx := context.Background()
	fork(t, s, "root", "")
	set(t, s, "root", "old", "x")
	require.NoError(t, s.Apply(ctx, memory.ApplyParams{Branch: "root",
		CoreSets:    []memory.CoreSetParams{{Key: "a", Value: "1"}, {Key: "b", Value: "2", Importance: 5}},
		CoreDeletes: []string{"old"},
		Archival:    []memory.ArchivalWriteParams{{Text: "batch fact one"}, {Text: "Batch  fact ONE"}, {Text: "batch fact two"}}}))
	v, _ := get(t, s, "root", "a")
	require.Equal(t, "1", v)
	_, ok := get(t, s, "root", "old")
	require.False(t, ok)
	hits := search(t, s, "root", "batch")
	require.Len(t, hits, 2)
	for _, h := range hits {
		if h.Text == "batch fact one" {
			require.Equal(t, 2, h.Count)
		}
	}

	err := s.Apply(ctx, memory.ApplyParams{Branch: "root",
		CoreSets: []memory.CoreSetParams{{Key: "c", Value: "3"}, {Key: "", Value: "bad"}},
		Archival: []memory.ArchivalWriteParams{{Text: "must not land"}}})
	require.ErrorIs(t, err, memory.ErrInvalid)
	_, ok = get(t, s, "root", "c")
	require.False(t, ok)
	require.Empty(t, search(t, s, "root", "land"))
	err = s.Apply(ctx, memory.ApplyParams{Branch: "nope", CoreSets: []memory.CoreSetParams{{Key: "c", Value: "3"}}})
	require.ErrorIs(t, err, memory.ErrNoBranch)
}
