package cluster

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/memory"
)

// TestStatsMatchClickHouse: the BM25 statistics kept in Redis (dl:<branch>)
// equal the count and total length of the visible texts in ClickHouse, for
// every branch of a tree with writes before and after its forks.
func TestStatsMatchClickHouse(t *testing.T) {
	ctx := context.Background()
	r := testutil.StartService(t, "redis")
	c := testutil.StartService(t, "clickhouse")
	s, err := Open(ctx, Options{Run: "stats", RedisURL: r.Env["HPCQ_REDIS_URL"], ClickHouseDSN: c.Env["HPCQ_CLICKHOUSE_DSN"], SpoolDir: t.TempDir()})
	require.NoError(t, err)
	defer s.Close()
	write := func(b string, n int) {
		for i := range n {
			_, _, err := s.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: b, Text: fmt.Sprintf("%s text %d %s", b, i, "word ")[:10+i%7]})
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
	_, _, err = s.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: "a1", Text: "ROOT  text"}) // repeats root's first text: no new text
	require.NoError(t, err)
	require.NoError(t, s.Flush(ctx))
	for _, b := range []string{"root", "a", "a1"} {
		sc, err := s.scope(ctx, b)
		require.NoError(t, err)
		docs, sumLen, err := s.stats(ctx, sc)
		require.NoError(t, err)
		cond, args := scopeSQL(sc)
		var chDocs, chLen uint64
		require.NoError(t, s.ch.QueryRow(ctx, `SELECT count(), sum(doc_len) FROM archival FINAL WHERE run = ? AND `+cond,
			append([]any{s.run}, args...)...).Scan(&chDocs, &chLen))
		require.Equal(t, chDocs, docs, b)
		require.Equal(t, chLen, sumLen, b)
		require.NotZero(t, docs)
	}
}
