package schedcmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hpcq/hpcq/internal/bridge"
	"github.com/hpcq/hpcq/internal/chdb"
	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/metrics"
	"github.com/hpcq/hpcq/internal/web"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// DefaultHTTPAddr is where the dashboard listens without --http.
const DefaultHTTPAddr = "127.0.0.1:8780"

// ServeOptions are what `scheduler serve` is asked.
type ServeOptions struct {
	// HTTP is the address to listen on (default DefaultHTTPAddr).
	HTTP string
	// RunDir serves one run; Runs every run under a directory (default:
	// the runs directory).
	RunDir, Runs string
	Log          *slog.Logger
}

// Serve is `scheduler serve`: the dashboard, the JSON API and /metrics
// over run directories, until ctx ends.
func Serve(ctx context.Context, cfg *config.Scheduler, o ServeOptions) error {
	if o.HTTP == "" {
		o.HTTP = DefaultHTTPAddr
	}
	if o.RunDir == "" && o.Runs == "" {
		o.Runs = cfg.RunsDir
	}
	token := os.Getenv(web.TokenEnv)
	ln, err := web.Listen(o.HTTP, token)
	if err != nil {
		return err
	}
	queues := newQueueCache(cfg, o.Log)
	defer queues.close()
	mems := newMemoryCache(cfg, o.Log)
	defer mems.closeAll()
	reg := metrics.NewRegistry()
	if cfg.NATS.URL != "" {
		queueCollector(reg, func(ctx context.Context) (*queue.Queue, error) { return queues.get(ctx, "") })
	}
	wo := web.Options{
		RunDir: o.RunDir, RunsDir: o.Runs, Token: token, Secrets: cfg.Secrets(), Log: o.Log,
		Query: func(ctx context.Context, dir, sql string) (*results.Table, error) {
			return queryRun(ctx, cfg, dir, sql)
		},
		Memory:  mems.get,
		Cluster: func(ctx context.Context, dir string) (*web.Cluster, error) { return clusterOf(ctx, queues, dir) },
		Metrics: metrics.Handler(reg),
	}
	if cfg.Store.ClickHouseDSN != "" && o.RunDir == "" {
		a := &archive{dsn: cfg.Store.ClickHouseDSN}
		defer a.close()
		wo.Archive = a.query
	}
	srv, err := web.New(wo)
	if err != nil {
		ln.Close()
		return err
	}
	metrics.NewRunsCollector(reg, srv.Counts)
	fmt.Printf("dashboard: http://%s/\n", ln.Addr())
	return srv.Serve(ctx, ln)
}

// serveRun serves the dashboard of the run going in this process on ln
// (from web.Listen), until ctx ends or stop is called: its live memory
// store and queue. stop shuts the server down and returns once it has
// ended, so that the run closes the store and the queue after the last
// request that reads them, and the listener is closed by the server's
// shutdown, not under its Accept.
func serveRun(ctx context.Context, cfg *config.Scheduler, ln net.Listener, runDir string, store memory.Store, q *queue.Queue,
	reg *prometheus.Registry, log *slog.Logger) (addr string, stop func(), err error) {
	token := os.Getenv(web.TokenEnv)
	o := web.Options{
		RunDir: runDir, Live: rundir.Dir(runDir).ID(), Token: token, Secrets: cfg.Secrets(), Log: log,
		Query: func(ctx context.Context, dir, sql string) (*results.Table, error) {
			return queryRun(ctx, cfg, dir, sql)
		},
		Cluster: func(ctx context.Context, _ string) (*web.Cluster, error) { return cluster(ctx, q), nil },
		Metrics: metrics.Handler(reg),
	}
	if store != nil {
		o.Memory = func(context.Context, string) (memory.Store, func(), error) { return store, func() {}, nil }
	}
	srv, err := web.New(o)
	if err != nil {
		ln.Close()
		return "", nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(sctx, ln); err != nil {
			log.Error("dashboard", "err", err)
		}
	}()
	return ln.Addr().String(), func() { cancel(); <-done }, nil
}

// archive queries the cluster's ClickHouse for `serve --runs`: one
// connection (a pool), opened at the first query and again after a failed
// open.
type archive struct {
	dsn  string
	mu   sync.Mutex
	conn driver.Conn
}

func (a *archive) query(ctx context.Context, sql string) (*results.Table, error) {
	a.mu.Lock()
	if a.conn == nil {
		c, err := chdb.Open(ctx, a.dsn)
		if err != nil {
			a.mu.Unlock()
			return nil, err
		}
		a.conn = c
	}
	c := a.conn
	a.mu.Unlock()
	return results.QueryClickHouse(ctx, c, sql)
}

func (a *archive) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.conn != nil {
		a.conn.Close()
	}
}

// queueCache keeps one connection per server the served runs use: the
// configured one (key ""), and each going local run's embedded server.
type queueCache struct {
	cfg *config.Scheduler
	log *slog.Logger
	mu  sync.Mutex
	qs  map[string]*cachedQueue
}

type cachedQueue struct {
	q     *queue.Queue
	close func()
}

func newQueueCache(cfg *config.Scheduler, log *slog.Logger) *queueCache {
	return &queueCache{cfg: cfg, log: log, qs: map[string]*cachedQueue{}}
}

// get returns the queue of the run in dir ("" the configured server).
func (c *queueCache) get(ctx context.Context, dir string) (*queue.Queue, error) {
	key := ""
	if dir != "" {
		info, err := rundir.Dir(dir).ReadInfo()
		if err != nil {
			return nil, err
		}
		if info.Mode == "local" {
			key = dir
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cq := c.qs[key]; cq != nil {
		if cq.q.Conn().IsConnected() {
			return cq.q, nil
		}
		cq.close()
		delete(c.qs, key)
	}
	var q *queue.Queue
	var closeQ func()
	var err error
	if key == "" {
		if c.cfg.NATS.URL == "" {
			return nil, errors.New("no NATS server configured (HPCQ_NATS_URL): the cluster panel needs one")
		}
		if q, err = queue.Dial(ctx, c.cfg.NATS.Conn("hpcq-serve"), c.cfg.Queue.Options(), c.log); err == nil {
			closeQ = q.Close
		}
	} else {
		q, closeQ, err = runQueue(ctx, c.cfg, dir, "hpcq-serve", false, c.log)
	}
	if err != nil {
		return nil, err
	}
	c.qs[key] = &cachedQueue{q: q, close: closeQ}
	return q, nil
}

func (c *queueCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, cq := range c.qs {
		cq.close()
		delete(c.qs, k)
	}
}

// clusterOf reads the queue a served run uses. A local run that is not
// going has none.
func clusterOf(ctx context.Context, queues *queueCache, dir string) (*web.Cluster, error) {
	q, err := queues.get(ctx, dir)
	if err != nil {
		if errors.Is(err, rundir.ErrNotRunning) {
			return &web.Cluster{Error: "the run is not going: its embedded server is stopped"}, nil
		}
		return nil, err
	}
	return cluster(ctx, q), nil
}

// cluster reads pools, workers and slurm-bridges from q; what cannot be
// read is in Error.
func cluster(ctx context.Context, q *queue.Queue) *web.Cluster {
	c := &web.Cluster{}
	var errs []string
	var err error
	if c.Pools, err = q.Stats(ctx); err != nil {
		errs = append(errs, "pools: "+err.Error())
	}
	if c.Workers, err = q.Workers(ctx); err != nil {
		errs = append(errs, "workers: "+err.Error())
	}
	bridges, err := bridge.AllStatuses(ctx, q)
	if err != nil {
		errs = append(errs, "slurm-bridge: "+err.Error())
	}
	for _, b := range bridges {
		c.Bridges = append(c.Bridges, web.BridgePool{Bridge: b.Bridge, Pool: b.Pool, Backlog: b.Backlog, Workers: b.Workers, JobsPending: b.Pending,
			JobsRunning: b.Running, Submitted: b.Submitted, Paused: b.Paused, PausedReason: b.PausedReason, LastError: b.LastError,
			Failures: b.Failures, Updated: b.Updated})
	}
	c.Error = strings.Join(errs, "; ")
	return c
}

// queueCollector adds the queue's pools to reg's metrics.
func queueCollector(reg *prometheus.Registry, get func(context.Context) (*queue.Queue, error)) {
	metrics.NewQueueCollector(reg, func(ctx context.Context) ([]metrics.PoolCounts, error) {
		q, err := get(ctx)
		if err != nil {
			return nil, err
		}
		stats, err := q.Stats(ctx)
		out := make([]metrics.PoolCounts, len(stats))
		for i, p := range stats {
			out[i] = metrics.PoolCounts{Pool: p.Pool, Pending: p.Pending, InFlight: p.InFlight, DeadLettered: p.DeadLettered,
				Workers: p.Workers, LostWorkers: p.LostWorkers}
		}
		return out, err
	})
}
