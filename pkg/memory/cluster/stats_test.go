package cluster

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/memory"
)

// storeOptions starts a Redis and a ClickHouse for the test and gives the
// options of a store of run on them.
func storeOptions(t *testing.T, run string) Options {
	t.Helper()
	r := testutil.StartService(t, "redis")
	c := testutil.StartService(t, "clickhouse")
	return Options{Run: run, RedisURL: r.Env["HPCQ_REDIS_URL"], ClickHouseDSN: c.Env["HPCQ_CLICKHOUSE_DSN"], SpoolDir: t.TempDir()}
}

// rawRedis is a client of the test's Redis, closed at the test's end.
func rawRedis(t *testing.T, url string) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(url)
	require.NoError(t, err)
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

// scopeSQL is the WHERE condition of a scope, with its arguments.
func scopeSQL(sc []scopeEntry) (string, []any) {
	var b strings.Builder
	args := make([]any, 0, 2*len(sc))
	b.WriteByte('(')
	for i, e := range sc {
		if i > 0 {
			b.WriteString(" OR ")
		}
		b.WriteString("(branch = ? AND seq <= ?)")
		args = append(args, e.Branch, e.MaxSeq)
	}
	b.WriteByte(')')
	return b.String(), args
}

// TestIndexMatchesClickHouse: the term index and the BM25 statistics kept
// in Redis (t:<branch>:<term>, dl:<branch>) hold exactly the visible texts
// the ClickHouse archival table holds, for every branch of a tree with
// writes before and after its forks and a repeated fact; a run whose
// index is gone (a run written before the index was kept in Redis) gets
// the same index back when the store is opened, and a second build's
// copies are not counted twice.
func TestIndexMatchesClickHouse(t *testing.T) {
	ctx := context.Background()
	opts := storeOptions(t, "stats")
	s, err := Open(ctx, opts)
	require.NoError(t, err)
	words := []string{"halo", "tile", "numa", "rank", "gcc"}
	write := func(b string, n int) {
		for i := range n {
			text := fmt.Sprintf("%s text %d %s %s", b, i, words[i%len(words)], strings.Repeat(words[(i+2)%len(words)]+" ", i%3))
			_, _, err := s.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: b, Text: text})
			require.NoError(t, err)
		}
	}
	_, err = s.Fork(ctx, memory.ForkParams{Branch: "root"})
	require.NoError(t, err)
	write("root", 7)
	_, err = s.Fork(ctx, memory.ForkParams{Branch: "a", Parent: "root"})
	require.NoError(t, err)
	write("root", 5) // after a's fork: invisible to a
	write("a", 4)
	_, err = s.Fork(ctx, memory.ForkParams{Branch: "a1", Parent: "a"})
	require.NoError(t, err)
	write("a", 3)
	write("a1", 6)
	_, _, err = s.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: "a1", Text: "ROOT  text 0 halo"}) // repeats root's first text: no new text
	require.NoError(t, err)
	require.NoError(t, s.Flush(ctx))

	terms := append([]string{"text", "root", "a", "a1", "0", "5", "absent"}, words...)
	check := func(s *Store) {
		t.Helper()
		for _, b := range []string{"root", "a", "a1"} {
			sc, err := s.scope(ctx, b)
			require.NoError(t, err)
			ps, docs, sumLen, err := s.postings(ctx, sc, terms)
			require.NoError(t, err)
			cond, args := scopeSQL(sc)
			rows, err := s.ch.Query(ctx, `SELECT seq, text, doc_len FROM archival FINAL WHERE run = ? AND `+cond, append([]any{s.run}, args...)...)
			require.NoError(t, err)
			var chDocs, chLen uint64
			var want []string
			for rows.Next() {
				var seq int64
				var text string
				var dl uint32
				require.NoError(t, rows.Scan(&seq, &text, &dl))
				chDocs++
				chLen += uint64(dl)
				tf, _ := termFreqs(text)
				for _, term := range terms {
					if tf[term] > 0 {
						want = append(want, fmt.Sprintf("%s/%d/%d/%d", term, seq, tf[term], dl))
					}
				}
			}
			require.NoError(t, rows.Err())
			rows.Close()
			var got []string
			for _, p := range ps {
				got = append(got, fmt.Sprintf("%s/%d/%d/%d", p.term, p.seq, p.tf, p.docLen))
			}
			sort.Strings(want)
			sort.Strings(got)
			require.Equal(t, chDocs, docs, b)
			require.Equal(t, chLen, sumLen, b)
			require.NotZero(t, docs)
			require.Equal(t, want, got, "postings of %s", b)
		}
	}
	check(s)
	require.NoError(t, s.Close())

	// The index goes; opening the store builds it again from the texts.
	rdb := rawRedis(t, opts.RedisURL)
	keys, err := rdb.Keys(ctx, "hpcq:{stats}:t:*").Result()
	require.NoError(t, err)
	require.NotEmpty(t, keys)
	require.NoError(t, rdb.Del(ctx, append(keys, "hpcq:{stats}:index")...).Err())
	s, err = Open(ctx, opts)
	require.NoError(t, err)
	check(s)
	require.NoError(t, s.Close())

	// A build run again (another process's, or one cut short) appends
	// copies of postings: searches count each text once all the same.
	require.NoError(t, rdb.Del(ctx, "hpcq:{stats}:index").Err())
	s, err = Open(ctx, opts)
	require.NoError(t, err)
	defer s.Close()
	check(s)
	got, err := s.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: "a1", Query: "halo", K: 3})
	require.NoError(t, err)
	require.Len(t, got, 3)
}

// TestRepeatIndexBuiltForOlderRuns: a run written before the repeats were
// kept by branch (index "1", no hitb: keys) gets them when the store is
// opened, the same as write.lua keeps them, and its searches count the
// same repeats.
func TestRepeatIndexBuiltForOlderRuns(t *testing.T) {
	ctx := context.Background()
	opts := storeOptions(t, "repeats")
	s, err := Open(ctx, opts)
	require.NoError(t, err)
	fork := func(b, p string) {
		_, err := s.Fork(ctx, memory.ForkParams{Branch: b, Parent: p})
		require.NoError(t, err)
	}
	write := func(b string, n int) {
		for range n {
			_, _, err := s.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: b, Text: "halo exchange overlaps compute"})
			require.NoError(t, err)
		}
	}
	fork("root", "")
	write("root", 4)
	fork("a", "root")
	write("root", 2)
	write("a", 3)
	fork("a1", "a")
	fork("a2", "a")
	write("a1", 5)
	write("a2", 1)
	write("a", 2)
	require.NoError(t, s.Flush(ctx))
	counts := func(s *Store) map[string]int {
		out := map[string]int{}
		for _, b := range []string{"root", "a", "a1", "a2"} {
			got, err := s.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: b, Query: "halo", K: 3})
			require.NoError(t, err)
			require.Len(t, got, 1, b)
			out[b] = got[0].Count
		}
		return out
	}
	want := counts(s)
	require.Equal(t, map[string]int{"root": 6, "a": 9, "a1": 12, "a2": 8}, want)
	require.NoError(t, s.Close())

	rdb := rawRedis(t, opts.RedisURL)
	keys, err := rdb.Keys(ctx, "hpcq:{repeats}:hitb:*").Result()
	require.NoError(t, err)
	require.Len(t, keys, 4, "one key per branch that repeated the text")
	kept := map[string][]string{}
	for _, k := range keys {
		kept[k], err = rdb.ZRange(ctx, k, 0, -1).Result()
		require.NoError(t, err)
	}
	require.NoError(t, rdb.Del(ctx, keys...).Err())
	require.NoError(t, rdb.Set(ctx, "hpcq:{repeats}:index", "1", 0).Err())

	s, err = Open(ctx, opts)
	require.NoError(t, err)
	defer s.Close()
	for k, members := range kept {
		got, err := rdb.ZRange(ctx, k, 0, -1).Result()
		require.NoError(t, err)
		require.Equal(t, members, got, k)
	}
	require.Equal(t, want, counts(s))
	v, err := rdb.Get(ctx, "hpcq:{repeats}:index").Result()
	require.NoError(t, err)
	require.Equal(t, indexVersion, v)
	require.Zero(t, scans(t, rdb), "the rebuild walks the run's items, not the keyspace")
}

// scans is how many SCAN commands the Redis of rdb has run (the test's
// own server).
func scans(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	for line := range strings.SplitSeq(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_scan:calls="); ok {
			n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			require.NoError(t, err)
			return n
		}
	}
	return 0
}

// TestNewRunIndexMarked: a new run's store is marked indexed at its open
// without walking the keyspace (other runs' keys), and keeps its indexes
// as it is written: a repeat is counted on the branches that see it.
func TestNewRunIndexMarked(t *testing.T) {
	ctx := context.Background()
	opts := storeOptions(t, "older")
	old, err := Open(ctx, opts)
	require.NoError(t, err)
	_, err = old.Fork(ctx, memory.ForkParams{Branch: "root"})
	require.NoError(t, err)
	for i := range 50 {
		_, _, err := old.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: "root", Text: fmt.Sprintf("lesson %d of an older run", i)})
		require.NoError(t, err)
	}
	require.NoError(t, old.Close())

	opts.Run = "newer"
	s, err := Open(ctx, opts)
	require.NoError(t, err)
	defer s.Close()
	rdb := rawRedis(t, opts.RedisURL)
	require.Zero(t, scans(t, rdb))
	v, err := rdb.Get(ctx, "hpcq:{newer}:index").Result()
	require.NoError(t, err)
	require.Equal(t, indexVersion, v)
	_, err = s.Fork(ctx, memory.ForkParams{Branch: "root"})
	require.NoError(t, err)
	for range 3 {
		_, _, err := s.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: "root", Text: "pin threads to cores before timing"})
		require.NoError(t, err)
	}
	require.NoError(t, s.Flush(ctx))
	got, err := s.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: "root", Query: "pin threads", K: 3})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, 3, got[0].Count)
}
