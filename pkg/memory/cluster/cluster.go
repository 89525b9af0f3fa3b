package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/redis/go-redis/v9"

	"github.com/hpcq/hpcq/internal/chdb"
	"github.com/hpcq/hpcq/internal/journal"
	"github.com/hpcq/hpcq/pkg/memory"
)

//go:embed write.lua
var writeLua string

var writeScript = redis.NewScript(writeLua)

//go:embed items.lua
var itemsLua string

// itemsScript reads search candidates with their visible repeats.
var itemsScript = redis.NewScript(itemsLua)

//go:embed hits.lua
var hitsLua string

// hitsScript indexes the repeats of a run written before by branch.
var hitsScript = redis.NewScript(hitsLua)

// unbounded is the max seq of a branch's own scope entry (below 2^53, so
// that Lua's doubles and cjson hold it exactly).
const unbounded = int64(1) << 50

// ErrUnavailable: a server the call needs cannot be reached. Writes are
// spooled meanwhile; reads fail with it. It wraps memory.ErrUnavailable, so
// a memory.OutageStore waits such failures out.
var ErrUnavailable = fmt.Errorf("memory/cluster: %w", memory.ErrUnavailable)

// Options configure Open.
type Options struct {
	// Run namespaces everything: runs never see each other.
	Run string
	// HalfLife of a fact's confidence in ranking (memory.Rank); default
	// memory.DefaultHalfLife.
	HalfLife time.Duration
	// RedisURL (HPCQ_REDIS_URL): redis://[user:password@]host:port/db, or
	// rediss:// for TLS.
	RedisURL string
	// RedisPassword (HPCQ_REDIS_PASSWORD), when set, replaces the URL's.
	RedisPassword string
	// RedisTLSCA (HPCQ_REDIS_TLS_CA) is a PEM file of CAs to trust; it
	// turns TLS on for a redis:// URL too.
	RedisTLSCA string
	// ClickHouseDSN (HPCQ_CLICKHOUSE_DSN): clickhouse://user:password@host:port/database.
	ClickHouseDSN string
	// SpoolDir holds the spool (spool-<run>.journal). One process opens a
	// spool at a time.
	SpoolDir string
	// CloseTimeout bounds how long Close waits for the servers to take
	// what is spooled (default 10s); what is left stays in the spool.
	CloseTimeout time.Duration
	// Now is the clock; tests inject their own.
	Now    func() time.Time
	Logger *slog.Logger
}

// scopeEntry is the visibility rule's unit, shared by the stores.
type scopeEntry = memory.ScopeEntry

// Store is a memory.Store on Redis (branches, seqs, core, recall,
// summaries, fact dedup) and ClickHouse (archival texts, their term index,
// repeats, and a mirror of recall events).
type Store struct {
	rdb          *redis.Client
	ch           driver.Conn
	ship         *shipper
	run          string
	prefix       string
	now          func() time.Time
	halfLife     time.Duration
	log          *slog.Logger
	scopes       *memory.Scopes
	closeTimeout time.Duration

	jr *journal.Journal
	// mu guards the spool state: the writes waiting for Redis, in order;
	// open, the number of journaled writes not yet complete in both
	// servers; redisErr, the error of the applier's last attempt (nil once
	// one succeeds); progress, closed and replaced after every attempt.
	mu       sync.Mutex
	waiting  []*record
	open     int
	redisErr error
	progress chan struct{}

	wake    chan struct{}
	stop    chan struct{}
	stopped []chan struct{}
	closed  bool
}

// record is one write as spooled: enough to apply it again.
type record struct {
	W   string `json:"w"`
	TS  int64  `json:"ts"`
	B   string `json:"b"`
	Ops []op   `json:"ops"`
}

// op is one write of a record, in the form write.lua reads.
type op struct {
	T      string `json:"t"`
	B      string `json:"b"`
	Parent string `json:"parent"`
	// core
	K string `json:"k,omitempty"`
	V string `json:"v,omitempty"`
	I int    `json:"i,omitempty"`
	E int64  `json:"e,omitempty"`
	D int    `json:"d,omitempty"`
	// recall
	TS      int64  `json:"ts,omitempty"`
	Kind    string `json:"kind,omitempty"`
	Node    string `json:"node,omitempty"`
	Phase   string `json:"phase,omitempty"`
	Payload string `json:"payload,omitempty"`
	// summary and archival
	Text   string `json:"text,omitempty"`
	Folded int64  `json:"folded,omitempty"`
	Fact   string `json:"fact,omitempty"`
	Tags   string `json:"tags,omitempty"` // JSON array
	Ctx    string `json:"ctx,omitempty"`
	Ep     string `json:"ep,omitempty"`
	Len    int    `json:"len,omitempty"` // archival: the text's length in terms
	// Tm is an archival text's term frequencies, for its postings. It is
	// computed when the write is sent to Redis, never spooled (spools of
	// any version replay the same).
	Tm map[string]int `json:"tm,omitempty"`
}

type factItem struct {
	S  int64  `json:"s"`
	B  string `json:"b"`
	Tx string `json:"tx"`
	Tg string `json:"tg"`
	C  string `json:"c"`
	F  string `json:"f"`
	Ep string `json:"ep"`
	TS int64  `json:"ts"`
}

type result struct {
	S     int64 `json:"s"`
	Depth int   `json:"depth"`
	// Dup is the seq of the stored item an archival write repeats.
	Dup int64 `json:"dup"`
}

type reply struct {
	R   []result `json:"r"`
	Err string   `json:"err"`
	Op  int      `json:"op"`
}

// SpoolFile is the spool of run in spoolDir.
func SpoolFile(spoolDir, run string) string { return filepath.Join(spoolDir, "spool-"+run+".journal") }

// checkRun refuses a run id that cannot name Redis keys.
func checkRun(run string) error {
	if run == "" || strings.ContainsAny(run, "{}: \t\n") {
		return fmt.Errorf("memory/cluster: run id %q: must be non-empty, without braces, colons or spaces", run)
	}
	return nil
}

// dialRedis connects to the Redis o names (URL, password, TLS CA) and
// checks that it answers.
func dialRedis(ctx context.Context, o Options) (*redis.Client, error) {
	ropts, err := redis.ParseURL(o.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("memory/cluster: HPCQ_REDIS_URL: %w", err)
	}
	if o.RedisPassword != "" {
		ropts.Password = o.RedisPassword
	}
	if o.RedisTLSCA != "" {
		pem, err := os.ReadFile(o.RedisTLSCA)
		if err != nil {
			return nil, fmt.Errorf("memory/cluster: HPCQ_REDIS_TLS_CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("memory/cluster: HPCQ_REDIS_TLS_CA: no certificate in %s", o.RedisTLSCA)
		}
		if ropts.TLSConfig == nil {
			host, _, _ := net.SplitHostPort(ropts.Addr)
			ropts.TLSConfig = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
		}
		ropts.TLSConfig.RootCAs = pool
	}
	ropts.DialTimeout = 2 * time.Second
	ropts.ReadTimeout = 5 * time.Second
	ropts.WriteTimeout = 5 * time.Second
	ropts.MaxRetries = 1
	rdb := redis.NewClient(ropts)
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("memory/cluster: redis at %s: %w", ropts.Addr, err)
	}
	return rdb, nil
}

// Open connects to both servers, applies the ClickHouse migrations, opens
// the spool and replays what it holds. Redis must answer at Open (the run's
// branches live there); ClickHouse may be away (its rows are spooled).
//
// Long: the store's start in order (Redis, ClickHouse, migrations, spool,
// replay), each undone by the steps after it when it fails.
func Open(ctx context.Context, o Options) (*Store, error) {
	if err := checkRun(o.Run); err != nil {
		return nil, err
	}
	if o.SpoolDir == "" {
		return nil, errors.New("memory/cluster: no spool directory")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.CloseTimeout <= 0 {
		o.CloseTimeout = 10 * time.Second
	}
	rdb, err := dialRedis(ctx, o)
	if err != nil {
		return nil, err
	}
	ch, err := chdb.Open(ctx, o.ClickHouseDSN)
	if err != nil {
		rdb.Close()
		return nil, err
	}
	if err := chdb.Migrate(ctx, ch); err != nil {
		rdb.Close()
		ch.Close()
		return nil, err
	}
	if err := os.MkdirAll(o.SpoolDir, 0o755); err != nil {
		rdb.Close()
		ch.Close()
		return nil, fmt.Errorf("memory/cluster: spool: %w", err)
	}
	s := &Store{rdb: rdb, ch: ch, run: o.Run, prefix: "hpcq:{" + o.Run + "}:", now: o.Now, halfLife: o.HalfLife, log: o.Logger,
		closeTimeout: o.CloseTimeout, progress: make(chan struct{}), wake: make(chan struct{}, 1), stop: make(chan struct{})}
	if err := s.checkPurged(ctx); err != nil {
		rdb.Close()
		ch.Close()
		return nil, err
	}
	s.ship = newShipper(ch, o.Run, s.complete)
	s.scopes = &memory.Scopes{Self: unbounded, Lookup: s.branchGet}
	if err := s.buildIndex(ctx); err != nil {
		rdb.Close()
		ch.Close()
		return nil, fmt.Errorf("memory/cluster: archival term index: %w", err)
	}
	var replay []*record
	s.jr, err = journal.Open(SpoolFile(o.SpoolDir, o.Run), journal.Options{Lock: true}, func(p []byte) error {
		var r record
		if err := json.Unmarshal(p, &r); err != nil {
			return fmt.Errorf("spool record %d: %w", len(replay)+1, err)
		}
		replay = append(replay, &r)
		return nil
	})
	if err != nil {
		rdb.Close()
		ch.Close()
		return nil, fmt.Errorf("memory/cluster: %w", err)
	}
	if len(replay) > 0 {
		s.log.Info("memory/cluster: replaying the spool", "writes", len(replay))
		s.waiting = replay
		s.open = len(replay)
		s.ship.dirty = true // some of their rows may be in ClickHouse already
	}
	for _, loop := range []func(chan struct{}){
		func(done chan struct{}) { s.ship.loop(s.stop, done) },
		s.applier,
		s.syncer,
	} {
		done := make(chan struct{})
		s.stopped = append(s.stopped, done)
		go loop(done)
	}
	if len(replay) > 0 {
		s.kick()
	}
	return s, nil
}

// Run is the run id the store is namespaced by.
func (s *Store) Run() string { return s.run }

// Close ships what it can and closes the connections. Writes that could not
// reach a server stay in the spool for the next Open of the same run.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), s.closeTimeout)
	defer cancel()
	var errs []error
	if err := s.waitRedis(ctx); err == nil {
		if err := s.ship.flush(ctx); err != nil {
			errs = append(errs, err)
		}
	} else {
		errs = append(errs, err)
	}
	close(s.stop)
	for _, d := range s.stopped {
		<-d
	}
	s.mu.Lock()
	clean := s.open == 0
	s.mu.Unlock()
	if clean {
		errs = append(errs, s.jr.Reset())
	} else {
		s.log.Warn("memory/cluster: writes left in the spool for the next open", "writes", s.open)
	}
	errs = append(errs, s.jr.Close(), s.rdb.Close(), s.ch.Close())
	return errors.Join(errs...)
}

// Flush waits until every acknowledged write is in Redis and ClickHouse.
func (s *Store) Flush(ctx context.Context) error {
	if err := s.waitRedis(ctx); err != nil {
		return err
	}
	return s.ship.flush(ctx)
}

// waitRedis waits for the spooled writes to reach Redis, through an
// outage if it must (bounded by ctx).
var _ memory.Store = (*Store)(nil)

// Size is what the run occupies: the compressed bytes of its rows in the
// ClickHouse memory tables (estimated from each table's share of rows)
// plus the memory of its Redis keys.
func (s *Store) Size(ctx context.Context) (int64, error) {
	var total int64
	for _, t := range []string{"archival", "archival_terms", "archival_hits", "recall_events"} {
		var bytes, rows uint64
		if err := s.ch.QueryRow(ctx, `SELECT sum(bytes_on_disk), sum(rows) FROM system.parts WHERE active AND database = currentDatabase() AND table = ?`, t).Scan(&bytes, &rows); err != nil {
			// 18.16 names it bytes; later versions have both.
			if err2 := s.ch.QueryRow(ctx, `SELECT sum(bytes), sum(rows) FROM system.parts WHERE active AND database = currentDatabase() AND table = ?`, t).Scan(&bytes, &rows); err2 != nil {
				return 0, unavailable("table sizes", err)
			}
		}
		if rows == 0 {
			continue
		}
		var mine uint64
		if err := s.ch.QueryRow(ctx, `SELECT count() FROM `+t+` WHERE run = ?`, s.run).Scan(&mine); err != nil {
			return 0, unavailable("table sizes", err)
		}
		total += int64(float64(bytes) * float64(mine) / float64(rows))
	}
	var cursor uint64
	for {
		keys, next, err := s.rdb.Scan(ctx, cursor, s.prefix+"*", 1000).Result()
		if err != nil {
			return 0, unavailable("key sizes", err)
		}
		pipe := s.rdb.Pipeline()
		cmds := make([]*redis.IntCmd, len(keys))
		for i, k := range keys {
			cmds[i] = pipe.MemoryUsage(ctx, k)
		}
		if len(keys) > 0 {
			if _, err := pipe.Exec(ctx); err != nil {
				return 0, unavailable("key sizes", err)
			}
		}
		for _, c := range cmds {
			total += c.Val()
		}
		if cursor = next; cursor == 0 {
			return total, nil
		}
	}
}
