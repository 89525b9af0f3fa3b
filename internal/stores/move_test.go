package stores_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/stores"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/memory/cluster"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// seen is what a branch reads: its view (core, summary, every event) and
// the texts and repeat counts of an archival search.
type seen struct {
	view   memory.View
	search []string
}

func reads(t *testing.T, st memory.Store, branches []string) map[string]seen {
	t.Helper()
	ctx := context.Background()
	out := map[string]seen{}
	for _, b := range branches {
		v, err := memory.ReadView(ctx, st, memory.ViewParams{Branch: b, Core: true})
		require.NoError(t, err)
		hits, err := st.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: b, Query: "stencil tiling vectorized loop", K: 8})
		require.NoError(t, err)
		var found []string
		for _, h := range hits {
			found = append(found, fmt.Sprintf("%s x%d %v", h.Text, h.Count, h.Tags))
		}
		out[b] = seen{view: v, search: found}
	}
	return out
}

// runKeys are the Redis keys of run.
func runKeys(t *testing.T, rdb *redis.Client, run string) []string {
	t.Helper()
	keys, err := rdb.Keys(context.Background(), "hpcq:{"+run+"}:*").Result()
	require.NoError(t, err)
	return keys
}

// TestMoveMemoryHome: moving cluster runs' memory out of Redis, on one
// Redis and ClickHouse.
func TestMoveMemoryHome(t *testing.T) {
	s, _ := clusterStores(t)
	rdb := redis.NewClient(must(redis.ParseURL(s.RedisURL)))
	t.Cleanup(func() { _ = rdb.Close() })
	t.Run("Moves", func(t *testing.T) { testMoves(t, s, rdb) })
	t.Run("FinishesAnInterruptedMove", func(t *testing.T) { testFinishesAnInterruptedMove(t, s, rdb) })
}

// testMoves: an ended cluster run's memory moves out of Redis into its run
// directory's SQLite file: every branch then reads there what it read in
// Redis (forks, tombstones, a TTL, summaries, repeats of archival texts
// across branches), run.json names the file, the run's Redis keys are gone
// but a marker that makes a later open say where the memory went, another
// run's keys are untouched, and moving again changes nothing.
func testMoves(t *testing.T, s config.Store, rdb *redis.Client) {
	ctx := context.Background()
	log := testutil.Logger(t)
	dir := rundir.Dir(filepath.Join(t.TempDir(), "20261125-080000-move01"))
	require.NoError(t, os.MkdirAll(string(dir), 0o755))
	st, where, err := stores.OpenMemory(ctx, s, dir, "", time.Hour, log)
	require.NoError(t, err)
	require.Equal(t, stores.MemoryCluster, where["store"])
	require.NoError(t, dir.WriteInfo(rundir.Info{RunID: dir.ID(), Command: "run", Mode: "cluster", Memory: where}))

	m := memory.New(st, memory.Config{RecallMaxEvents: 3}, memory.Options{Summarizer: joinSummary{}, Logger: log})
	branches := []string{"root", "a", "b", "a1"}
	for i, b := range branches {
		parent := map[string]string{"a": "root", "b": "root", "a1": "a"}[b]
		_, err := m.Fork(ctx, b, parent)
		require.NoError(t, err)
		_, err = m.CoreSet(ctx, memory.CoreSetParams{Branch: b, Key: "STEP", Value: fmt.Sprint(i)})
		require.NoError(t, err)
		for j := range 4 {
			_, err := m.RecallAppend(ctx, b, memory.RecallEvent{Kind: "node_result", NodeID: b, Payload: fmt.Sprintf("%s event %d", b, j)})
			require.NoError(t, err)
		}
		_, _, err = m.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: b, Text: "a stencil with tiling ran faster in " + b, Tags: []string{"perf", b}})
		require.NoError(t, err)
		// The same lesson in every branch: one text, repeats by branch.
		_, _, err = m.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: b, Text: "the vectorized loop needs aligned arrays", Tags: []string{"lesson"}})
		require.NoError(t, err)
	}
	_, err = m.CoreSet(ctx, memory.CoreSetParams{Branch: "root", Key: "BRIEF", Value: "soon gone", TTL: time.Hour})
	require.NoError(t, err)
	require.NoError(t, st.CoreDelete(ctx, memory.CoreKeyParams{Branch: "a1", Key: "STEP"}))
	before := reads(t, st, branches)
	require.Equal(t, "root event 0 root event 1 root event 2 root event 3 a event 0 a event 1 a event 2 a event 3 a1 event 0",
		before["a1"].view.Summary.Text, "folded along the path: all but the window of 3")
	require.Contains(t, before["a1"].search, "the vectorized loop needs aligned arrays x3 [lesson]", "the repeats of the path")
	require.NoError(t, st.Close())

	// Another run's memory in the same Redis.
	other := rundir.Dir(filepath.Join(t.TempDir(), "20261125-080000-other1"))
	os2, _, err := stores.OpenMemory(ctx, s, other, "", 0, log)
	require.NoError(t, err)
	_, err = os2.Fork(ctx, memory.ForkParams{Branch: "root"})
	require.NoError(t, err)
	require.NoError(t, os2.Close())
	otherKeys := runKeys(t, rdb, other.ID())
	require.NotEmpty(t, otherKeys)

	mv, err := stores.MoveMemoryHome(ctx, s, dir, log)
	require.NoError(t, err)
	require.Equal(t, dir.Path(rundir.MemoryDB), mv.File)
	require.Equal(t, 4, mv.Branches)
	require.Equal(t, 16, mv.Recall)
	require.Equal(t, 5, mv.Archival, "four texts of their own, one lesson")
	require.Equal(t, 3, mv.Repeats, "the lesson again in a, b and a1")
	require.Equal(t, 6, mv.Core, "a STEP each, BRIEF, a tombstone")
	require.Positive(t, mv.Summaries)
	require.Positive(t, mv.Keys)

	require.Equal(t, []string{"hpcq:{" + dir.ID() + "}:purged"}, runKeys(t, rdb, dir.ID()), "only the marker stays")
	require.ElementsMatch(t, otherKeys, runKeys(t, rdb, other.ID()), "another run's keys are untouched")
	_, err = cluster.Open(ctx, cluster.Options{Run: dir.ID(), RedisURL: s.RedisURL, ClickHouseDSN: s.ClickHouseDSN, SpoolDir: t.TempDir(), Logger: log})
	require.ErrorIs(t, err, cluster.ErrPurged)
	require.ErrorContains(t, err, "moved to "+mv.File)

	info, err := dir.ReadInfo()
	require.NoError(t, err)
	require.Equal(t, stores.MemorySQLite, info.Memory["store"])
	require.Equal(t, rundir.MemoryDB, info.Memory["file"])
	require.Equal(t, "1h0m0s", info.Memory["half_life"])
	require.NotEmpty(t, info.Memory[stores.MovedKey])

	// Read as the dashboard and an export do, with no server configured.
	copied, err := stores.ReadMemory(ctx, config.Store{}, dir, info.Memory, log)
	require.NoError(t, err)
	after := reads(t, copied, branches)
	require.NoError(t, copied.Close())
	for _, b := range branches {
		require.Equal(t, before[b].view, after[b].view, b)
		require.Equal(t, before[b].search, after[b].search, b)
	}

	again, err := stores.MoveMemoryHome(ctx, s, dir, log)
	require.NoError(t, err, "moving again finds it done")
	require.Zero(t, again.Keys)
	// A removal cut short leaves keys behind the marker: moving again
	// removes them and keeps the first marker.
	marker := "hpcq:{" + dir.ID() + "}:purged"
	first, err := rdb.Get(ctx, marker).Result()
	require.NoError(t, err)
	require.NoError(t, rdb.Set(ctx, "hpcq:{"+dir.ID()+"}:recall:left", "x", 0).Err())
	again, err = stores.MoveMemoryHome(ctx, s, dir, log)
	require.NoError(t, err)
	require.Equal(t, 1, again.Keys)
	require.Equal(t, []string{marker}, runKeys(t, rdb, dir.ID()))
	require.Equal(t, first, rdb.Get(ctx, marker).Val())
	_, err = stores.MoveMemoryHome(ctx, s, other, log)
	require.ErrorContains(t, err, "has no run.json")
}

// testFinishesAnInterruptedMove: run.json already names the copy but Redis
// still holds the run (the move stopped before its last step): moving
// again removes the keys. A run that never kept its memory in Redis has
// nothing to move.
func testFinishesAnInterruptedMove(t *testing.T, s config.Store, rdb *redis.Client) {
	ctx := context.Background()
	log := testutil.Logger(t)
	dir := rundir.Dir(filepath.Join(t.TempDir(), "20261125-080000-half01"))
	require.NoError(t, os.MkdirAll(string(dir), 0o755))
	st, _, err := stores.OpenMemory(ctx, s, dir, "", 0, log)
	require.NoError(t, err)
	_, err = st.Fork(ctx, memory.ForkParams{Branch: "root"})
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.NoError(t, dir.WriteInfo(rundir.Info{RunID: dir.ID(), Command: "run", Memory: map[string]string{
		"store": stores.MemorySQLite, "file": rundir.MemoryDB, stores.MovedKey: "2026-11-25T08:00:00Z"}}))

	mv, err := stores.MoveMemoryHome(ctx, s, dir, log)
	require.NoError(t, err)
	require.Positive(t, mv.Keys)
	require.Len(t, runKeys(t, rdb, dir.ID()), 1, "the marker")

	require.NoError(t, dir.WriteInfo(rundir.Info{RunID: dir.ID(), Command: "run", Memory: map[string]string{"store": stores.MemorySQLite, "file": rundir.MemoryDB}}))
	_, err = stores.MoveMemoryHome(ctx, s, dir, log)
	require.ErrorContains(t, err, "keeps its memory in its run directory")
	require.NoError(t, dir.WriteInfo(rundir.Info{RunID: dir.ID(), Command: "run", Memory: map[string]string{"enabled": "false"}}))
	_, err = stores.MoveMemoryHome(ctx, s, dir, log)
	require.ErrorContains(t, err, "kept no memory")
}

// joinSummary folds an event into the summary by appending its payload.
type joinSummary struct{}

func (joinSummary) Summarize(_ context.Context, summary string, ev memory.RecallEvent) (string, error) {
	return strings.TrimSpace(summary + " " + ev.Payload), nil
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
