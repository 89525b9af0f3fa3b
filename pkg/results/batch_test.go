package results_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/benchutil"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/results"
)

// countingSink is a real sink whose Writes are counted, and refused while
// refuse is above zero.
type countingSink struct {
	results.Sink
	writes atomic.Int64
	refuse atomic.Int64
}

func (c *countingSink) Write(ctx context.Context, rows results.Rows) error {
	c.writes.Add(1)
	if c.refuse.Add(-1) >= 0 {
		return errors.New("refused (test)")
	}
	return c.Sink.Write(ctx, rows)
}

func openCounted(t *testing.T) (*countingSink, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hpcq.sqlite")
	s, err := results.OpenSQLite(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return &countingSink{Sink: s}, path
}

func callRow(node string, i int) results.Rows {
	return results.Rows{LLMCalls: []results.LLMCall{{Run: "b", Node: node, CallID: fmt.Sprint(i), Purpose: "draft", Model: "m", TS: t0}}}
}

func count(t *testing.T, path, q string) int64 {
	t.Helper()
	tab, err := results.QuerySQLite(context.Background(), path, q)
	require.NoError(t, err)
	return tab.Rows[0][0].(int64)
}

// TestBatchWritesTogether: rows added by many goroutines at once are
// written in one Write by Flush, each row once.
func TestBatchWritesTogether(t *testing.T) {
	sink, path := openCounted(t)
	b := results.NewBatch(sink, time.Hour, testutil.Logger(t))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				b.Add(callRow(fmt.Sprint("n", g), i))
			}
		}()
	}
	wg.Wait()
	require.Zero(t, sink.writes.Load(), "nothing written before the interval or a flush")
	require.NoError(t, b.Flush(context.Background()))
	require.EqualValues(t, 1, sink.writes.Load())
	require.EqualValues(t, 800, count(t, path, `SELECT count(*) FROM llm_calls`))
	require.EqualValues(t, 800, count(t, path, `SELECT count(DISTINCT node || '/' || call_id) FROM llm_calls`))
	require.NoError(t, b.Flush(context.Background()))
	require.EqualValues(t, 1, sink.writes.Load(), "an empty flush writes nothing")
	require.NoError(t, b.Close())
}

// TestBatchWritesWithinTheInterval: rows reach the sink without a flush.
func TestBatchWritesWithinTheInterval(t *testing.T) {
	sink, path := openCounted(t)
	b := results.NewBatch(sink, 10*time.Millisecond, testutil.Logger(t))
	defer b.Close()
	for i := range 50 {
		b.Add(callRow("n", i))
	}
	require.Eventually(t, func() bool { return count(t, path, `SELECT count(*) FROM llm_calls`) == 50 }, 10*time.Second, 5*time.Millisecond)
	require.Less(t, sink.writes.Load(), int64(50), "written together")
}

// TestBatchBadRowFailsAlone: a row SQLite refuses (a NaN metric is NULL
// there, and metrics.value is NOT NULL) does not keep the others out; it
// is tried batchTries (3) times and then dropped.
func TestBatchBadRowFailsAlone(t *testing.T) {
	sink, path := openCounted(t)
	b := results.NewBatch(sink, time.Hour, testutil.Logger(t))
	b.Add(callRow("n", 1))
	b.Add(results.Rows{Metrics: []results.Metric{{Run: "b", Node: "n", Attempt: 1, Name: "gflops", Value: math.NaN(), TS: t0}}})
	b.Add(callRow("n", 2))
	ctx := context.Background()
	require.ErrorContains(t, b.Flush(ctx), "NOT NULL")
	require.EqualValues(t, 2, count(t, path, `SELECT count(*) FROM llm_calls`), "the good rows are written")
	require.EqualValues(t, 4, sink.writes.Load(), "the batch, then each alone")
	require.ErrorContains(t, b.Flush(ctx), "NOT NULL", "second try")
	require.ErrorContains(t, b.Flush(ctx), "NOT NULL", "third try")
	before := sink.writes.Load()
	require.NoError(t, b.Flush(ctx), "dropped after three")
	require.Equal(t, before, sink.writes.Load())
	require.EqualValues(t, 0, count(t, path, `SELECT count(*) FROM metrics`))
	require.EqualValues(t, 2, count(t, path, `SELECT count(*) FROM llm_calls`), "nothing written twice")
}

// TestBatchKeepsRowsWhileRefused: while the sink refuses every write the
// rows stay queued, and the next write that goes through stores them.
func TestBatchKeepsRowsWhileRefused(t *testing.T) {
	sink, path := openCounted(t)
	b := results.NewBatch(sink, time.Hour, testutil.Logger(t))
	for i := range 3 {
		b.Add(callRow("n", i))
	}
	sink.refuse.Store(4) // the batch and the three alone
	require.ErrorContains(t, b.Flush(context.Background()), "refused")
	require.EqualValues(t, 0, count(t, path, `SELECT count(*) FROM llm_calls`))
	require.NoError(t, b.Close(), "the sink takes them again")
	require.EqualValues(t, 3, count(t, path, `SELECT count(*) FROM llm_calls`))
}

// TestBatchAfterClose: a row added after Close is written at once.
func TestBatchAfterClose(t *testing.T) {
	sink, path := openCounted(t)
	b := results.NewBatch(sink, time.Hour, testutil.Logger(t))
	b.Add(callRow("n", 1))
	require.NoError(t, b.Close())
	require.EqualValues(t, 1, count(t, path, `SELECT count(*) FROM llm_calls`))
	b.Add(callRow("n", 2))
	require.EqualValues(t, 2, count(t, path, `SELECT count(*) FROM llm_calls`))
	require.EqualValues(t, 2, sink.writes.Load())
}

func nodeRow(node string) results.Rows {
	v := 1.5
	return results.Rows{
		Nodes:     []results.Node{{Run: "b", Node: node, Stage: 1, Kind: "draft", Pool: "cpu", Attempt: 1, Status: "ok", MetricName: "gflops", MetricValue: &v, TS: t0}},
		PhaseRuns: []results.PhaseRun{{Run: "b", Node: node, Attempt: 1, Worker: "w", Phase: "run", Status: "ok", TS: t0}},
		Metrics:   []results.Metric{{Run: "b", Node: node, Attempt: 1, Name: "gflops", Value: v, TS: t0}},
	}
}

// TestBatchWriteWaitsForItsRows: a Write returns once its rows are in the
// file (with the rows added before it, though their interval is an hour
// off), and Writes made together share transactions.
func TestBatchWriteWaitsForItsRows(t *testing.T) {
	sink, path := openCounted(t)
	b := results.NewBatch(sink, time.Hour, testutil.Logger(t))
	defer b.Close()
	ctx := context.Background()
	b.Add(callRow("n0", 1))
	require.NoError(t, b.Write(ctx, nodeRow("n0")))
	require.EqualValues(t, 1, count(t, path, `SELECT count(*) FROM nodes WHERE node = 'n0'`))
	require.EqualValues(t, 1, count(t, path, `SELECT count(*) FROM llm_calls`), "the rows added before went with it")

	const writers, each = 16, 20
	before := sink.writes.Load()
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				node := fmt.Sprintf("w%02d-%02d", g, i)
				if err := b.Write(ctx, nodeRow(node)); err != nil {
					t.Error(err)
					return
				}
				if n := count(t, path, `SELECT count(*) FROM metrics WHERE node = '`+node+`'`); n != 1 {
					t.Errorf("%s: %d metrics rows after its Write returned", node, n)
				}
			}
		}()
	}
	wg.Wait()
	require.EqualValues(t, 1+writers*each, count(t, path, `SELECT count(*) FROM nodes`))
	require.Less(t, sink.writes.Load()-before, int64(writers*each), "Writes made together are written together")
}

// TestBatchWriteRefused: a Write whose rows the sink refuses gets the
// error and they are not tried again; the rows gathered with them are
// written.
func TestBatchWriteRefused(t *testing.T) {
	sink, path := openCounted(t)
	b := results.NewBatch(sink, time.Hour, testutil.Logger(t))
	defer b.Close()
	ctx := context.Background()
	b.Add(callRow("n", 1))
	bad := results.Rows{Metrics: []results.Metric{{Run: "b", Node: "n", Attempt: 1, Name: "gflops", Value: math.NaN(), TS: t0}}}
	require.ErrorContains(t, b.Write(ctx, bad), "NOT NULL")
	require.EqualValues(t, 3, sink.writes.Load(), "the batch, then each alone")
	require.EqualValues(t, 1, count(t, path, `SELECT count(*) FROM llm_calls`))
	require.NoError(t, b.Flush(ctx), "the refused Write is not queued again")
	require.EqualValues(t, 3, sink.writes.Load())

	// A Write given up by its caller is still written.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, b.Write(gone, nodeRow("late")), context.Canceled)
	require.NoError(t, b.Flush(ctx))
	require.EqualValues(t, 1, count(t, path, `SELECT count(*) FROM nodes WHERE node = 'late'`))
}

// BenchmarkSQLiteWriteNode is what the engine writes when a node ends (its
// nodes row, a phase row and a metric): one Write alone, then nodes ending
// at a pace written each alone or through a Batch, against an LLM call's
// row written through a Batch.
func BenchmarkSQLiteWriteNode(b *testing.B) {
	path := filepath.Join(b.TempDir(), "hpcq.sqlite")
	s, err := results.OpenSQLite(path)
	require.NoError(b, err)
	defer s.Close()
	ctx := context.Background()
	b.Run("node", func(b *testing.B) {
		for i := range b.N {
			node := fmt.Sprintf("n%07d", i)
			require.NoError(b, s.Write(ctx, nodeRow(node)))
		}
	})
	// 64 nodes in flight ending at random, about 600 a second (as in a
	// run of the engine benchmark), each waiting until its rows are stored:
	// a Write each, then through a Batch. cpu-us/op is the process's CPU
	// time per node (ns/op is the pace).
	for _, via := range []string{"node-paced-direct", "node-paced-batch"} {
		b.Run(via, func(b *testing.B) {
			batch := results.NewBatch(s, time.Hour, nil)
			defer batch.Close()
			var next atomic.Int64
			b.SetParallelism(32) // 64 goroutines on 2 cores
			cpu := benchutil.CPUTime()
			defer func() { b.ReportMetric(float64((benchutil.CPUTime()-cpu).Microseconds())/float64(b.N), "cpu-us/op") }()
			b.RunParallel(func(pb *testing.PB) {
				rng := rand.New(rand.NewPCG(uint64(next.Add(1)), 1))
				for pb.Next() {
					time.Sleep(time.Duration(rng.Int64N(int64(200 * time.Millisecond)))) //nolint:forbidigo // writers at random paces
					rows := nodeRow(fmt.Sprintf("%s-%07d", via, next.Add(1)))
					if via == "node-paced-direct" {
						require.NoError(b, s.Write(ctx, rows))
					} else {
						require.NoError(b, batch.Write(ctx, rows))
					}
				}
			})
		})
	}
	b.Run("call-batched", func(b *testing.B) {
		batch := results.NewBatch(s, time.Hour, nil)
		for i := range b.N {
			batch.Add(callRow(fmt.Sprintf("n%07d", i), i))
			if i%256 == 255 {
				require.NoError(b, batch.Flush(ctx))
			}
		}
		require.NoError(b, batch.Close())
	})
}
