package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/chdb"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/memory/cluster"
	"github.com/hpcq/hpcq/pkg/memory/memorytest"
)

// servers starts a real redis-server and clickhouse-server (scripts/services.sh)
// for the test and its subtests.
func servers(t *testing.T) (redisURL, chDSN string) {
	t.Helper()
	r := testutil.StartService(t, "redis")
	c := testutil.StartService(t, "clickhouse")
	return r.Env["HPCQ_REDIS_URL"], c.Env["HPCQ_CLICKHOUSE_DSN"]
}

var runs atomic.Int64

// open opens a store on a fresh run id: runs never see each other.
func open(t *testing.T, redisURL, chDSN string, o cluster.Options) *cluster.Store {
	t.Helper()
	if o.Run == "" {
		o.Run = fmt.Sprintf("test-%d", runs.Add(1))
	}
	o.RedisURL, o.ClickHouseDSN = redisURL, chDSN
	if o.SpoolDir == "" {
		o.SpoolDir = t.TempDir()
	}
	s, err := cluster.Open(context.Background(), o)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	redisURL, chDSN := servers(t)
	memorytest.Exercise(t, func(t *testing.T, clock *memorytest.Clock) memory.Store {
		return open(t, redisURL, chDSN, cluster.Options{Now: clock.Now})
	})
}

// writer writes to its branch until stop is closed, recording each write
// acknowledged (returned without error): core key, recall event and
// archival text carry the same number.
type writer struct {
	branch string
	acked  []int
	errs   []error
	n      atomic.Int64 // len(acked), for the test to watch
}

func (w *writer) run(ctx context.Context, s memory.Store, stop <-chan struct{}, archival bool) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		_, err := s.CoreSet(ctx, memory.CoreSetParams{Branch: w.branch, Key: fmt.Sprintf("k%d", i), Value: fmt.Sprint(i)})
		if err == nil {
			_, err = s.RecallAppend(ctx, memory.RecallAppendParams{Branch: w.branch, Event: memory.RecallEvent{Kind: "run_done", Payload: fmt.Sprintf("event %d", i)}})
		}
		if err == nil && archival {
			_, _, err = s.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: w.branch, Text: fmt.Sprintf("note %s w%dx about tiling", w.branch, i)})
		}
		if err != nil {
			w.errs = append(w.errs, err)
			return
		}
		w.acked = append(w.acked, i)
		w.n.Add(1)
		time.Sleep(5 * time.Millisecond) //nolint:forbidigo // a writer at a steady pace
	}
}

// outage runs writers on four branches, calls down once they have written
// a little, keeps them writing a while, calls up, and returns them.
func outage(t *testing.T, s *cluster.Store, archival bool, down, up func()) []*writer {
	t.Helper()
	ctx := context.Background()
	_, err := s.Fork(ctx, memory.ForkParams{Branch: "root"})
	require.NoError(t, err)
	var ws []*writer
	for i := range 4 {
		b := fmt.Sprintf("b%d", i)
		_, err := s.Fork(ctx, memory.ForkParams{Branch: b, Parent: "root"})
		require.NoError(t, err)
		ws = append(ws, &writer{branch: b})
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() { defer wg.Done(); w.run(ctx, s, stop, archival) }()
	}
	testutil.Eventually(t, 10*time.Second, "30 writes", func() bool { return ws[0].n.Load() >= 30 })
	t.Logf("%d writes acknowledged; stopping the server", ws[0].n.Load())
	down()
	n := ws[0].n.Load()
	testutil.Eventually(t, 10*time.Second, "30 writes more while the server is away", func() bool { return ws[0].n.Load() >= n+30 })
	t.Logf("%d writes acknowledged; starting the server", ws[0].n.Load())
	up()
	t.Logf("server back")
	time.Sleep(200 * time.Millisecond) //nolint:forbidigo // writes go on a while after the server is back
	close(stop)
	wg.Wait()
	for _, w := range ws {
		require.Empty(t, w.errs, "writes keep being acknowledged while a server is away")
	}
	fctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	require.NoError(t, s.Flush(fctx))
	t.Logf("flushed")
	return ws
}

// checkExactlyOnce: every acknowledged write of ws is in s exactly once.
func checkExactlyOnce(t *testing.T, s *cluster.Store, chDSN string, ws []*writer, archival bool) {
	t.Helper()
	ctx := context.Background()
	ch, err := chdb.Open(ctx, chDSN)
	require.NoError(t, err)
	defer ch.Close()
	for _, w := range ws {
		core, err := s.CoreList(ctx, memory.CoreListParams{Branch: w.branch})
		require.NoError(t, err)
		have := map[string]string{}
		for _, e := range core {
			have[e.Key] = e.Value
		}
		evs, total, err := s.RecallList(ctx, memory.RecallListParams{Branch: w.branch, Total: true})
		require.NoError(t, err)
		seen := map[string]int{}
		for _, e := range evs {
			seen[e.Payload]++
		}
		for _, i := range w.acked {
			require.Equal(t, fmt.Sprint(i), have[fmt.Sprintf("k%d", i)], "core k%d of %s", i, w.branch)
			require.Equal(t, 1, seen[fmt.Sprintf("event %d", i)], "event %d of %s", i, w.branch)
		}
		// Writes after the last acknowledged one may have landed too, once.
		require.LessOrEqual(t, total, len(w.acked)+1)
		for p, n := range seen {
			require.Equal(t, 1, n, "event %q of %s stored %d times", p, w.branch, n)
		}
		if !archival {
			continue
		}
		// Through the API for a sample, through SQL for all of them.
		for k, i := range w.acked {
			if k%20 != 0 && k != len(w.acked)-1 {
				continue
			}
			hits, err := s.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: w.branch, Query: fmt.Sprintf("w%dx", i), K: 8})
			require.NoError(t, err)
			require.Len(t, hits, 1, "archival text %d of %s", i, w.branch)
			require.Equal(t, 1, hits[0].Count)
		}
		rows, err := ch.Query(ctx, `SELECT text, count() FROM archival FINAL WHERE run = ? AND branch = ? GROUP BY text`, s.Run(), w.branch)
		require.NoError(t, err)
		stored := map[string]uint64{}
		for rows.Next() {
			var text string
			var n uint64
			require.NoError(t, rows.Scan(&text, &n))
			stored[text] = n
		}
		require.NoError(t, rows.Err())
		rows.Close()
		for _, i := range w.acked {
			require.Equal(t, uint64(1), stored[fmt.Sprintf("note %s w%dx about tiling", w.branch, i)], "archival text %d of %s", i, w.branch)
		}
	}
}

// TestRedisRestart: Redis (appendonly) stops in the middle of writes from
// four goroutines and comes back: the writes go on meanwhile (spooled), and
// every acknowledged write is there exactly once.
func TestRedisRestart(t *testing.T) {
	r := testutil.StartService(t, "redis")
	c := testutil.StartService(t, "clickhouse")
	s := open(t, r.Env["HPCQ_REDIS_URL"], c.Env["HPCQ_CLICKHOUSE_DSN"], cluster.Options{})
	var readErr error
	ws := outage(t, s, true, func() {
		r.Stop()
		time.Sleep(300 * time.Millisecond) //nolint:forbidigo // the outage lasts a while
		_, readErr = s.CoreList(context.Background(), memory.CoreListParams{Branch: "b0"})
	}, r.Start)
	require.ErrorIs(t, readErr, cluster.ErrUnavailable, "reads fail clearly while Redis is away")
	checkExactlyOnce(t, s, c.Env["HPCQ_CLICKHOUSE_DSN"], ws, true)
}

// TestClickHouseRestart: ClickHouse stops while batches are being inserted
// and comes back: nothing acknowledged is lost or stored twice, and reads
// (served by Redis) go on meanwhile.
func TestClickHouseRestart(t *testing.T) {
	r := testutil.StartService(t, "redis")
	c := testutil.StartService(t, "clickhouse")
	s := open(t, r.Env["HPCQ_REDIS_URL"], c.Env["HPCQ_CLICKHOUSE_DSN"], cluster.Options{})
	var searchErr error
	var hits []memory.ArchivalItem
	ws := outage(t, s, true, func() {
		c.Stop()
		hits, searchErr = s.ArchivalSearch(context.Background(), memory.ArchivalSearchParams{Branch: "b0", Query: "tiling"})
	}, c.Start)
	require.NoError(t, searchErr, "archival search is served by Redis while ClickHouse is away")
	require.NotEmpty(t, hits, "archival search while ClickHouse is away")
	checkExactlyOnce(t, s, c.Env["HPCQ_CLICKHOUSE_DSN"], ws, true)
	// Each text is one row (FINAL folds what a retried batch stored twice).
	conn, err := chdb.Open(context.Background(), c.Env["HPCQ_CLICKHOUSE_DSN"])
	require.NoError(t, err)
	defer conn.Close()
	var rows, texts uint64
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT count(), uniqExact(text) FROM archival FINAL WHERE run = ?`, s.Run()).Scan(&rows, &texts))
	require.Equal(t, texts, rows)
	acked := 0
	for _, w := range ws {
		acked += len(w.acked)
	}
	require.GreaterOrEqual(t, int(rows), acked)
}

// TestSpoolSurvivesClose: writes spooled while Redis is away and still
// there when the process closes the store are applied by the next Open of
// the run, once.
func TestSpoolSurvivesClose(t *testing.T) {
	ctx := context.Background()
	r := testutil.StartService(t, "redis")
	c := testutil.StartService(t, "clickhouse")
	redisURL, chDSN := r.Env["HPCQ_REDIS_URL"], c.Env["HPCQ_CLICKHOUSE_DSN"]
	spool := t.TempDir()
	o := cluster.Options{Run: "spool-test", SpoolDir: spool, CloseTimeout: 200 * time.Millisecond}
	s := open(t, redisURL, chDSN, o)
	_, err := s.Fork(ctx, memory.ForkParams{Branch: "root"})
	require.NoError(t, err)
	_, _, err = s.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: "root", Text: "written before the outage"})
	require.NoError(t, err)
	r.Stop()
	for i := range 10 {
		_, err := s.RecallAppend(ctx, memory.RecallAppendParams{Branch: "root", Event: memory.RecallEvent{Kind: "run_done", Payload: fmt.Sprintf("spooled %d", i)}})
		require.NoError(t, err)
	}
	_, _, err = s.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: "root", Text: "spooled archival fact"})
	require.NoError(t, err)
	_, err = s.Fork(ctx, memory.ForkParams{Branch: "child", Parent: "root"})
	require.ErrorIs(t, err, cluster.ErrUnavailable, "a fork is not spooled")
	require.Error(t, s.Close(), "Close says writes were left in the spool")

	r.Start()
	s = open(t, redisURL, chDSN, o)
	require.NoError(t, s.Flush(ctx))
	evs, total, err := s.RecallList(ctx, memory.RecallListParams{Branch: "root", Total: true})
	require.NoError(t, err)
	require.Equal(t, 10, total)
	for i, e := range evs {
		require.Equal(t, fmt.Sprintf("spooled %d", i), e.Payload, "replayed in order")
	}
	hits, err := s.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: "root", Query: "spooled fact outage"})
	require.NoError(t, err)
	require.Len(t, hits, 2)
	require.NoError(t, s.Close())
	// A third open finds an empty spool: nothing is applied twice.
	s = open(t, redisURL, chDSN, o)
	_, total, err = s.RecallList(ctx, memory.RecallListParams{Branch: "root", Total: true})
	require.NoError(t, err)
	require.Equal(t, 10, total)
}

// TestRedisAuth: against a Redis that requires a password, the store works
// with the password in HPCQ_REDIS_PASSWORD or in the URL, and says clearly
// when it is missing or wrong.
func TestRedisAuth(t *testing.T) {
	ctx := context.Background()
	t.Setenv("HPCQ_REDIS_REQUIREPASS", "s3cret-pw")
	r := testutil.StartService(t, "redis")
	c := testutil.StartService(t, "clickhouse")
	url, dsn := r.Env["HPCQ_REDIS_URL"], c.Env["HPCQ_CLICKHOUSE_DSN"]
	require.NotContains(t, url, "s3cret", "the password is not in the URL services.sh prints")

	_, err := cluster.Open(ctx, cluster.Options{Run: "noauth", RedisURL: url, ClickHouseDSN: dsn, SpoolDir: t.TempDir()})
	require.ErrorContains(t, err, "NOAUTH")
	_, err = cluster.Open(ctx, cluster.Options{Run: "wrong", RedisURL: url, RedisPassword: "nope", ClickHouseDSN: dsn, SpoolDir: t.TempDir()})
	require.ErrorContains(t, err, "WRONGPASS")

	for _, o := range []cluster.Options{
		{RedisPassword: "s3cret-pw"},
		{Run: "in-url"},
	} {
		u := url
		if o.RedisPassword == "" {
			u = strings.Replace(url, "redis://", "redis://:s3cret-pw@", 1)
		}
		s := open(t, u, dsn, o)
		_, err := s.Fork(ctx, memory.ForkParams{Branch: "root"})
		require.NoError(t, err)
		_, err = s.CoreSet(ctx, memory.CoreSetParams{Branch: "root", Key: "k", Value: "v"})
		require.NoError(t, err)
		e, ok, err := s.CoreGet(ctx, memory.CoreKeyParams{Branch: "root", Key: "k"})
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "v", e.Value)
	}
}

// TestRedisTLS: a Redis that speaks only TLS (rediss://), trusted through
// HPCQ_REDIS_TLS_CA; without the CA the certificate is refused.
func TestRedisTLS(t *testing.T) {
	ctx := context.Background()
	cert, key := testutil.SelfSigned(t, t.TempDir())
	t.Setenv("HPCQ_REDIS_TLS_CERT", cert)
	t.Setenv("HPCQ_REDIS_TLS_KEY", key)
	r := testutil.StartService(t, "redis")
	c := testutil.StartService(t, "clickhouse")
	url, dsn := r.Env["HPCQ_REDIS_URL"], c.Env["HPCQ_CLICKHOUSE_DSN"]
	require.True(t, strings.HasPrefix(url, "rediss://"), url)

	_, err := cluster.Open(ctx, cluster.Options{Run: "untrusted", RedisURL: url, ClickHouseDSN: dsn, SpoolDir: t.TempDir()})
	require.ErrorContains(t, err, "certificate")
	_, err = cluster.Open(ctx, cluster.Options{Run: "plain", RedisURL: strings.Replace(url, "rediss://", "redis://", 1),
		ClickHouseDSN: dsn, SpoolDir: t.TempDir()})
	require.Error(t, err, "a plain connection to a TLS port fails")

	s := open(t, url, dsn, cluster.Options{RedisTLSCA: cert})
	_, err = s.Fork(ctx, memory.ForkParams{Branch: "root"})
	require.NoError(t, err)
	_, err = s.RecallAppend(ctx, memory.RecallAppendParams{Branch: "root", Event: memory.RecallEvent{Kind: "run_done", Payload: "over TLS"}})
	require.NoError(t, err)
	evs, _, err := s.RecallList(ctx, memory.RecallListParams{Branch: "root"})
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.Equal(t, "over TLS", evs[0].Payload)
}

// TestNoStaleReadsAcrossStores: two stores of one run (two schedulers, or a
// scheduler and a worker, each with its own spool) read each other's
// writes as soon as the writer's own reads see them: no store keeps a copy
// of what another can change (searches, core, recall and branches are read
// from Redis every time).
func TestNoStaleReadsAcrossStores(t *testing.T) {
	ctx := context.Background()
	redisURL, chDSN := servers(t)
	a := open(t, redisURL, chDSN, cluster.Options{Run: "shared"})
	b := open(t, redisURL, chDSN, cluster.Options{Run: "shared"})
	_, err := a.Fork(ctx, memory.ForkParams{Branch: "root"})
	require.NoError(t, err)
	applied := func(s *cluster.Store) {
		t.Helper()
		// A store's reads wait for its own writes: after this one, Redis has them.
		_, err := s.CoreList(ctx, memory.CoreListParams{Branch: "root"})
		require.NoError(t, err)
	}
	for i := range 30 {
		w, r := a, b
		if i%2 == 1 {
			w, r = b, a
		}
		word := fmt.Sprintf("word%dx", i)
		_, _, err := w.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: "root", Text: "tiling note " + word})
		require.NoError(t, err)
		_, err = w.CoreSet(ctx, memory.CoreSetParams{Branch: "root", Key: "LAST", Value: word})
		require.NoError(t, err)
		_, err = w.RecallAppend(ctx, memory.RecallAppendParams{Branch: "root", Event: memory.RecallEvent{Kind: "run_done", Payload: word}})
		require.NoError(t, err)
		applied(w)

		hits, err := r.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: "root", Query: word})
		require.NoError(t, err)
		require.Len(t, hits, 1, "write %d seen by the other store's search", i)
		hits, err = r.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: "root", Query: "tiling", K: 100})
		require.NoError(t, err)
		require.Len(t, hits, i+1, "every text so far in the statistics and postings the other store reads")
		e, ok, err := r.CoreGet(ctx, memory.CoreKeyParams{Branch: "root", Key: "LAST"})
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, word, e.Value)
		evs, _, err := r.RecallList(ctx, memory.RecallListParams{Branch: "root", Limit: 1, Newest: true})
		require.NoError(t, err)
		require.Len(t, evs, 1)
		require.Equal(t, word, evs[0].Payload)
	}
	// A repeat written by one store counts in the other's ranking.
	_, _, err = b.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: "root", Text: "tiling note word0x"})
	require.NoError(t, err)
	applied(b)
	hits, err := a.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: "root", Query: "word0x"})
	require.NoError(t, err)
	require.Len(t, hits, 1)
	require.Equal(t, 2, hits[0].Count)
	// A branch forked by one store is read by the other.
	_, err = b.Fork(ctx, memory.ForkParams{Branch: "child", Parent: "root"})
	require.NoError(t, err)
	hits, err = a.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: "child", Query: "word29x"})
	require.NoError(t, err)
	require.Len(t, hits, 1)
}
