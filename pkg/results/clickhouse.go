package results

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/hpcq/hpcq/internal/chdb"
	"github.com/hpcq/hpcq/internal/journal"
)

// ClickHouse is the sink of a cluster run. Write appends the rows to a
// local spool and returns; a goroutine inserts them in batches (one per
// table) and retries while ClickHouse is away, so an outage loses nothing.
// A batch sent twice (a retry after a lost answer) is folded by the tables'
// ReplacingMergeTree engine: its rows have the same sorting keys.
type ClickHouse struct {
	conn driver.Conn
	jr   *journal.Journal
	log  *slog.Logger

	mu      sync.Mutex
	queued  Rows
	closed  bool
	lastErr error
	sent    chan struct{} // closed and replaced after each attempt
	wake    chan struct{}
	stop    chan struct{}
	stopped chan struct{}
}

// ClickHouseOptions configure OpenClickHouse.
type ClickHouseOptions struct {
	// DSN (HPCQ_CLICKHOUSE_DSN): clickhouse://user:password@host:port/database.
	DSN string
	// SpoolDir holds the spool (results-<name>.journal).
	SpoolDir string
	// Name tells the spools of several sinks in one directory apart (a
	// worker id, a run id).
	Name   string
	Logger *slog.Logger
}

// SpoolFile is the spool of the sink named name in spoolDir.
func SpoolFile(spoolDir, name string) string {
	return filepath.Join(spoolDir, "results-"+name+".journal")
}

// OpenClickHouse connects, applies the migrations, and replays what the
// spool holds from an earlier process.
func OpenClickHouse(ctx context.Context, o ClickHouseOptions) (*ClickHouse, error) {
	if o.SpoolDir == "" || o.Name == "" || strings.ContainsAny(o.Name, "/\\") {
		return nil, fmt.Errorf("results: a spool directory and a name without slashes are required (name %q)", o.Name)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	conn, err := chdb.Open(ctx, o.DSN)
	if err != nil {
		return nil, err
	}
	if err := chdb.Migrate(ctx, conn); err != nil {
		conn.Close()
		return nil, err
	}
	if err := os.MkdirAll(o.SpoolDir, 0o755); err != nil {
		conn.Close()
		return nil, fmt.Errorf("results: spool: %w", err)
	}
	c := &ClickHouse{conn: conn, log: o.Logger, sent: make(chan struct{}), wake: make(chan struct{}, 1),
		stop: make(chan struct{}), stopped: make(chan struct{})}
	c.jr, err = journal.Open(SpoolFile(o.SpoolDir, o.Name), journal.Options{Lock: true}, func(p []byte) error {
		var r Rows
		if err := json.Unmarshal(p, &r); err != nil {
			return fmt.Errorf("results spool: %w", err)
		}
		c.queued = c.queued.Append(r)
		return nil
	})
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("results: %w", err)
	}
	go c.loop()
	if c.queued.Len() > 0 {
		c.kick()
	}
	return c, nil
}

func (c *ClickHouse) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Write spools rows; they reach ClickHouse within a second while it is up.
func (c *ClickHouse) Write(_ context.Context, rows Rows) error {
	if rows.Len() == 0 {
		return nil
	}
	rows = rows.withIDs()
	data, err := json.Marshal(rows)
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("results: sink closed")
	}
	if err := c.jr.Append(data); err != nil {
		return fmt.Errorf("results: spool: %w", err)
	}
	if c.lastErr != nil {
		// ClickHouse is away: the spool is the only copy.
		if err := c.jr.Sync(); err != nil {
			return fmt.Errorf("results: spool: %w", err)
		}
	}
	c.queued = c.queued.Append(rows)
	if c.queued.Len() >= shipRows {
		c.kick()
	}
	return nil
}

// shipEvery is how long rows may wait in the queue; shipRows queued send
// at once. Every insert is a part ClickHouse merges later, and while a
// table is small (parts under a megabyte) each merge rewrites it whole: a
// sink per worker inserting five times a second kept a ClickHouse core
// busy merging (BENCHMARKS.md, `make bench-engine-cluster`). ClickHouse's
// advice is an insert a second at most; Flush sends at once.
const (
	shipEvery = time.Second
	shipRows  = 50_000
)

func (c *ClickHouse) loop() {
	defer close(c.stopped)
	t := time.NewTicker(shipEvery)
	defer t.Stop()
	backoff := 100 * time.Millisecond
	var retry <-chan time.Time
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			if retry != nil {
				continue // waiting out a backoff
			}
		case <-c.wake:
			if retry != nil {
				continue
			}
		case <-retry:
		}
		retry = nil
		if err := c.send(context.Background()); err != nil {
			retry = time.After(backoff)
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
	}
}

// send inserts what is queued; on failure it stays queued.
func (c *ClickHouse) send(ctx context.Context) error {
	c.mu.Lock()
	rows := c.queued
	c.mu.Unlock()
	if rows.Len() == 0 {
		return nil
	}
	err := c.insert(ctx, rows)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil && c.lastErr == nil {
		c.log.Warn("results: ClickHouse unreachable; rows are spooled until it is back", "err", err)
	}
	if err == nil && c.lastErr != nil {
		c.log.Info("results: ClickHouse is back; spooled rows inserted")
	}
	c.lastErr = err
	if err == nil {
		// Rows written meanwhile stay queued, and in the spool.
		c.queued = Rows{
			Runs: c.queued.Runs[len(rows.Runs):], Nodes: c.queued.Nodes[len(rows.Nodes):],
			PhaseRuns: c.queued.PhaseRuns[len(rows.PhaseRuns):], Metrics: c.queued.Metrics[len(rows.Metrics):],
			LLMCalls: c.queued.LLMCalls[len(rows.LLMCalls):], Artifacts: c.queued.Artifacts[len(rows.Artifacts):],
		}
		if c.queued.Len() == 0 {
			if rerr := c.jr.Reset(); rerr != nil {
				c.log.Warn("results: reset spool", "err", rerr)
			}
		}
	}
	close(c.sent)
	c.sent = make(chan struct{})
	return err
}

func (c *ClickHouse) insert(ctx context.Context, rows Rows) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	vals := rows.values()
	for _, table := range Tables {
		if len(vals[table]) == 0 {
			continue
		}
		b, err := c.conn.PrepareBatch(ctx, fmt.Sprintf("INSERT INTO %s (%s)", table, strings.Join(Columns[table], ", ")))
		if err != nil {
			return fmt.Errorf("insert into %s: %w", table, err)
		}
		for _, row := range vals[table] {
			if err := b.Append(row...); err != nil {
				_ = b.Abort() // the append's error is the one to report
				return fmt.Errorf("insert into %s: %w", table, err)
			}
		}
		if err := b.Send(); err != nil {
			return fmt.Errorf("insert into %s: %w", table, err)
		}
	}
	return nil
}

// Flush waits until every row written before the call is in ClickHouse.
func (c *ClickHouse) Flush(ctx context.Context) error {
	for {
		c.mu.Lock()
		n, ch := c.queued.Len(), c.sent
		c.mu.Unlock()
		if n == 0 {
			return nil
		}
		c.kick()
		select {
		case <-ch:
		case <-ctx.Done():
			c.mu.Lock()
			err := c.lastErr
			c.mu.Unlock()
			return fmt.Errorf("results: %d rows not yet in ClickHouse (%v): %w", n, err, ctx.Err())
		}
	}
}

// Close inserts what it can within 10 seconds; what is left stays in the
// spool for the next OpenClickHouse with the same name.
func (c *ClickHouse) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ferr := c.Flush(ctx)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	close(c.stop)
	<-c.stopped
	return errors.Join(ferr, c.jr.Close(), c.conn.Close())
}
