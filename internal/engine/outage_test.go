package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hpcq/hpcq/internal/local"
	"github.com/hpcq/hpcq/internal/session"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/chdb"
	"github.com/hpcq/hpcq/internal/fakellm"
	"github.com/hpcq/hpcq/internal/run"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/memory/cluster"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/results"
)

// countingStore counts the calls that found a server away, through any
// method (the first call to meet an outage, which the run then repeats
// until the server is back, depends on timing: counting only some methods
// made TestRunRidesOutAnOutage fail now and then).
type countingStore struct {
	memory.Store
	unavailable atomic.Int64
}

func (c *countingStore) note(err error) {
	if errors.Is(err, memory.ErrUnavailable) {
		c.unavailable.Add(1)
	}
}

func (c *countingStore) Fork(ctx context.Context, p memory.ForkParams) (memory.Branch, error) {
	b, err := c.Store.Fork(ctx, p)
	c.note(err)
	return b, err
}

func (c *countingStore) ArchivalSearch(ctx context.Context, p memory.ArchivalSearchParams) ([]memory.ArchivalItem, error) {
	it, err := c.Store.ArchivalSearch(ctx, p)
	c.note(err)
	return it, err
}

func (c *countingStore) CoreList(ctx context.Context, p memory.CoreListParams) ([]memory.CoreEntry, error) {
	es, err := c.Store.CoreList(ctx, p)
	c.note(err)
	return es, err
}

func (c *countingStore) RecallList(ctx context.Context, p memory.RecallListParams) ([]memory.RecallEvent, int, error) {
	ev, n, err := c.Store.RecallList(ctx, p)
	c.note(err)
	return ev, n, err
}

func (c *countingStore) RecallUnfolded(ctx context.Context, branch string, limit int) (memory.RecallSummary, int, error) {
	sum, n, err := c.Store.RecallUnfolded(ctx, branch, limit)
	c.note(err)
	return sum, n, err
}

func (c *countingStore) BranchGet(ctx context.Context, id string) (memory.Branch, error) {
	b, err := c.Store.BranchGet(ctx, id)
	c.note(err)
	return b, err
}

func (c *countingStore) CoreSet(ctx context.Context, p memory.CoreSetParams) (memory.CoreEntry, error) {
	e, err := c.Store.CoreSet(ctx, p)
	c.note(err)
	return e, err
}

func (c *countingStore) CoreDelete(ctx context.Context, p memory.CoreKeyParams) error {
	err := c.Store.CoreDelete(ctx, p)
	c.note(err)
	return err
}

func (c *countingStore) CoreGet(ctx context.Context, p memory.CoreKeyParams) (memory.CoreEntry, bool, error) {
	e, ok, err := c.Store.CoreGet(ctx, p)
	c.note(err)
	return e, ok, err
}

func (c *countingStore) RecallAppend(ctx context.Context, p memory.RecallAppendParams) (memory.RecallEvent, error) {
	e, err := c.Store.RecallAppend(ctx, p)
	c.note(err)
	return e, err
}

func (c *countingStore) RecallSearch(ctx context.Context, p memory.RecallSearchParams) ([]memory.RecallEvent, error) {
	ev, err := c.Store.RecallSearch(ctx, p)
	c.note(err)
	return ev, err
}

func (c *countingStore) RecallSummaryGet(ctx context.Context, branch string) (memory.RecallSummary, error) {
	sum, err := c.Store.RecallSummaryGet(ctx, branch)
	c.note(err)
	return sum, err
}

func (c *countingStore) RecallSummarySet(ctx context.Context, p memory.RecallSummarySetParams) error {
	err := c.Store.RecallSummarySet(ctx, p)
	c.note(err)
	return err
}

func (c *countingStore) ArchivalWrite(ctx context.Context, p memory.ArchivalWriteParams) (memory.ArchivalItem, bool, error) {
	it, dup, err := c.Store.ArchivalWrite(ctx, p)
	c.note(err)
	return it, dup, err
}

func (c *countingStore) Apply(ctx context.Context, p memory.ApplyParams) error {
	err := c.Store.Apply(ctx, p)
	c.note(err)
	return err
}

func (c *countingStore) Flush(ctx context.Context) error {
	return c.Store.(interface{ Flush(context.Context) error }).Flush(ctx)
}

// clusterRun is a run on the cluster stores (Redis + ClickHouse for the
// memory, ClickHouse for the results) with an embedded NATS server whose
// AckWait is 2 s and one real worker.
type clusterRun struct {
	sp         session.Params
	p          Params
	redis, ch  *testutil.Server
	dsn, runID string
	store      *countingStore
	spool      string
}

func newClusterRun(t *testing.T, spec run.Spec, handle func(fakellm.Request) fakellm.Reply) *clusterRun {
	t.Helper()
	c := &clusterRun{redis: testutil.StartService(t, "redis"), ch: testutil.StartService(t, "clickhouse"), spool: t.TempDir()}
	c.dsn = c.ch.Env["HPCQ_CLICKHOUSE_DSN"]
	dir := filepath.Join(t.TempDir(), "run-outage")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "memory"), 0o755))
	c.runID = filepath.Base(dir)
	log := testutil.Logger(t)
	ctx := context.Background()
	sink, err := results.OpenClickHouse(ctx, results.ClickHouseOptions{DSN: c.dsn, SpoolDir: c.spool, Name: "scheduler", Logger: log})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sink.Close() })
	l, err := local.Start(ctx, local.Params{RunDir: dir, Logger: log, GatewayInstaller: true,
		Queue:  queue.Options{AckWait: 2 * time.Second},
		Worker: worker.Config{Pools: []string{"cpu"}, Slots: 2, Cores: 2}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	cs, err := cluster.Open(ctx, cluster.Options{Run: c.runID, RedisURL: c.redis.Env["HPCQ_REDIS_URL"], ClickHouseDSN: c.dsn,
		SpoolDir: c.spool, Logger: log})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	c.store = &countingStore{Store: cs}
	srv := fakellm.New(t, handle)
	client, err := llm.NewOpenAI(llm.OpenAIOptions{BaseURL: srv.BaseURL(), APIKey: "test-key", Model: "test-model", MaxAttempts: 3,
		Backoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Timeout: 8 * time.Second, Logger: log})
	require.NoError(t, err)
	c.sp = session.Params{Spec: spec, RunDir: dir, LLM: client, MemoryStore: c.store, Results: sink, Logger: log}
	c.p = Params{Queue: l.Queue, Results: sink, WorkersWriteResults: false, Mode: "cluster", Gateway: l.Conn}
	return c
}

func (c *clusterRun) count(t *testing.T, query string) string {
	t.Helper()
	conn, err := chdb.Open(context.Background(), c.dsn)
	require.NoError(t, err)
	defer conn.Close()
	tab, err := results.QueryClickHouse(context.Background(), conn, fmt.Sprintf(query, c.runID))
	require.NoError(t, err, query)
	return fmt.Sprint(tab.Rows[0][0])
}

// TestRunRidesOutAnOutage: Redis, then ClickHouse, stop mid-run for longer
// than a node takes and longer than AckWait. The run holds its nodes while
// Redis (which serves the memory's reads) is away and goes on when it is
// back; ClickHouse away only delays the copies, which the run's end waits
// for: every node runs and is ok, every node's memory events and archival
// entries are in ClickHouse once, the run is done and nothing is left in a
// spool.
func TestRunRidesOutAnOutage(t *testing.T) {
	t.Parallel()
	spec := newSpec(t)
	spec.Stages.InitialImplementation.MaxIterations, spec.Search.NumDrafts, spec.Search.Slots = 5, 5, 1
	var c *clusterRun
	var outages sync.WaitGroup
	outage := func(s *testutil.Server) {
		defer outages.Done()
		s.Stop()
		time.Sleep(5 * time.Second) //nolint:forbidigo // a node takes about 1 s; AckWait is 2 s
		s.Start()
	}
	handle := func(r fakellm.Request) fakellm.Reply {
		if r.Kind == "draft" && r.Attempt == 1 && (r.KindN == 2 || r.KindN == 4) {
			outages.Add(1)
			if r.KindN == 2 {
				go outage(c.redis)
			} else {
				go outage(c.ch)
			}
		}
		return normal(r)
	}
	c = newClusterRun(t, spec, handle)
	sum, err := runEngine(t, context.Background(), c.sp, c.p)
	outages.Wait()
	require.NoError(t, err)
	require.Equal(t, 5, sum.Nodes)
	require.Zero(t, sum.Buggy, "an outage is not a node's bug")
	require.Empty(t, sum.Unflushed)
	require.Positive(t, c.store.unavailable.Load(), "Redis was away while the run needed it")

	require.Equal(t, "5", c.count(t, "SELECT count() FROM nodes FINAL WHERE run = '%s' AND status = 'ok'"))
	require.Equal(t, "5", c.count(t, "SELECT count() FROM recall_events FINAL WHERE run = '%s' AND kind = 'node_created'"))
	require.Equal(t, "5", c.count(t, "SELECT uniqExact(branch) FROM recall_events FINAL WHERE run = '%s' AND kind = 'node_created'"))
	require.Equal(t, "5", c.count(t, "SELECT count() FROM archival FINAL WHERE run = '%s' AND has(tags, 'SUCCESS')"))
	require.Equal(t, "done", c.count(t, "SELECT argMax(status, ts) FROM runs FINAL WHERE run = '%s'"))
}

// TestOutageLongerThanTheLimit: with Redis away for longer than OutageMax
// the run ends interrupted (an error that says how to resume, the runs row
// and the report say why), no node is buggy for it, and a resume once
// Redis is back finishes the tree.
func TestOutageLongerThanTheLimit(t *testing.T) {
	t.Parallel()
	spec := newSpec(t)
	spec.Stages.InitialImplementation.MaxIterations, spec.Search.NumDrafts, spec.Search.Slots = 3, 3, 1
	var c *clusterRun
	var once sync.Once
	handle := func(r fakellm.Request) fakellm.Reply {
		if r.Kind == "draft" && r.KindN == 2 {
			once.Do(c.redis.Stop)
		}
		return normal(r)
	}
	c = newClusterRun(t, spec, handle)
	c.sp.OutageMax = 3 * time.Second
	sum, err := runEngine(t, context.Background(), c.sp, c.p)
	require.ErrorContains(t, err, "interrupted (resume with --resume")
	require.ErrorIs(t, err, memory.ErrOutage)
	require.Contains(t, sum.StoppedBy, "outage longer than the limit")
	require.Zero(t, sum.Buggy)
	require.Less(t, sum.Nodes, 3+1)
	report, rerr := os.ReadFile(filepath.Join(c.sp.RunDir, "report.md"))
	require.NoError(t, rerr)
	require.Contains(t, string(report), "outage longer than the limit")
	require.Equal(t, "interrupted", c.count(t, "SELECT argMax(status, ts) FROM runs FINAL WHERE run = '%s'"))

	c.redis.Start()
	c.sp.OutageMax = time.Minute
	sum, err = runEngine(t, context.Background(), c.sp, c.p)
	require.NoError(t, err)
	require.Equal(t, 3, sum.Nodes)
	require.Zero(t, sum.Buggy)
	require.Equal(t, "3", c.count(t, "SELECT count() FROM nodes FINAL WHERE run = '%s' AND status = 'ok'"))
	require.Equal(t, "3", c.count(t, "SELECT count() FROM recall_events FINAL WHERE run = '%s' AND kind = 'node_created'"))
}

// TestMemoryLost: Redis loses the run's memory mid-run (as one restarted
// without its data would come back): the run stops, interrupted and
// resumable, saying what happened, instead of failing the nodes that
// follow with "no such branch".
func TestMemoryLost(t *testing.T) {
	t.Parallel()
	spec := newSpec(t)
	spec.Stages.InitialImplementation.MaxIterations, spec.Search.NumDrafts, spec.Search.Slots = 4, 4, 1
	var c *clusterRun
	var once sync.Once
	handle := func(r fakellm.Request) fakellm.Reply {
		if r.Kind == "draft" && r.KindN == 2 {
			once.Do(func() {
				opts, err := redis.ParseURL(c.redis.Env["HPCQ_REDIS_URL"])
				if err == nil {
					rdb := redis.NewClient(opts)
					err = rdb.FlushAll(context.Background()).Err()
					rdb.Close()
				}
				if err != nil {
					t.Errorf("flush redis: %v", err)
				}
			})
		}
		return normal(r)
	}
	c = newClusterRun(t, spec, handle)
	sum, err := runEngine(t, context.Background(), c.sp, c.p)
	require.ErrorIs(t, err, memory.ErrLost)
	require.ErrorContains(t, err, "interrupted (resume with --resume")
	require.ErrorContains(t, err, "did Redis restart without its data?")
	require.Contains(t, sum.StoppedBy, "no longer holds this run's memory")
	require.Less(t, sum.Nodes, 4)
	t.Logf("nodes %d, buggy %d, stopped by %s", sum.Nodes, sum.Buggy, sum.StoppedBy)
	require.Equal(t, "interrupted", c.count(t, "SELECT argMax(status, ts) FROM runs FINAL WHERE run = '%s'"))
}
