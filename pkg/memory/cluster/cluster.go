package cluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
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

// Open connects to both servers, applies the ClickHouse migrations, opens
// the spool and replays what it holds. Redis must answer at Open (the run's
// branches live there); ClickHouse may be away (its rows are spooled).
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.Run == "" || strings.ContainsAny(o.Run, "{}: \t\n") {
		return nil, fmt.Errorf("memory/cluster: run id %q: must be non-empty, without braces, colons or spaces", o.Run)
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
	s := &Store{rdb: rdb, ch: ch, run: o.Run, prefix: "hpcq:{" + o.Run + "}:", now: o.Now, log: o.Logger,
		closeTimeout: o.CloseTimeout, progress: make(chan struct{}), wake: make(chan struct{}, 1), stop: make(chan struct{})}
	s.ship = newShipper(ch, o.Run, s.complete)
	s.scopes = &memory.Scopes{Self: unbounded, Lookup: s.branchGet}
	var replay []*record
	s.jr, err = journal.Open(filepath.Join(o.SpoolDir, "spool-"+o.Run+".journal"), journal.Options{}, func(p []byte) error {
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
func (s *Store) waitRedis(ctx context.Context) error {
	for {
		s.mu.Lock()
		n, ch := len(s.waiting), s.progress
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		s.kick()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w: %d writes still waiting for Redis: %w", ErrUnavailable, n, ctx.Err())
		}
	}
}

// readable waits until this process's earlier writes are in Redis, so that
// a read sees them; while Redis is away it fails at once.
func (s *Store) readable(ctx context.Context) error {
	for {
		s.mu.Lock()
		n, err, ch := len(s.waiting), s.redisErr, s.progress
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: Redis is unreachable (%v); %d writes are spooled and replayed when it is back, and reads wait for them", ErrUnavailable, err, n)
		}
		s.kick()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *Store) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// complete marks records done in both servers; an empty spool is reset.
func (s *Store) complete(records int) {
	if records == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open -= records
	if s.open == 0 && s.jr.Size() > 1<<20 {
		if err := s.jr.Reset(); err != nil {
			s.log.Warn("memory/cluster: reset spool", "err", err)
		}
	}
}

// syncer fsyncs the spool every 50 ms while writes go straight to Redis
// (spooled writes waiting for a server are fsync'd one by one).
func (s *Store) syncer(done chan struct{}) {
	defer close(done)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			_ = s.jr.Sync()
			return
		case <-t.C:
			if err := s.jr.Sync(); err != nil {
				s.log.Warn("memory/cluster: sync spool", "err", err)
			}
		}
	}
}

// applyBatch is the most writes one pipeline carries to Redis.
const applyBatch = 512

// applier applies the waiting writes to Redis in order, many per pipeline,
// and retries with backoff while Redis is away.
func (s *Store) applier(done chan struct{}) {
	defer close(done)
	var retry <-chan time.Time
	backoff := 50 * time.Millisecond
	for {
		select {
		case <-s.stop:
			return
		case <-s.wake:
		case <-retry:
		}
		retry = nil
		for {
			s.mu.Lock()
			batch := append([]*record(nil), s.waiting[:min(len(s.waiting), applyBatch)]...)
			s.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			reps, err := s.evalBatch(context.Background(), batch)
			if err == nil {
				// Rows go to the shipper before the writes count as applied: a
				// reader that waited for them then flushes their rows too.
				for i, r := range batch {
					if reps[i].Err != "" {
						// Only a spooled write whose branch vanished gets here
						// (writes are checked before they are spooled): it is
						// logged and dropped rather than block every later one.
						s.log.Error("memory/cluster: spooled write rejected by Redis", "write", r.W, "branch", r.B, "err", reps[i].Err)
						s.ship.enqueue(chRows{records: 1})
						continue
					}
					s.ship.enqueue(s.rowsOf(r, reps[i]))
				}
			}
			s.mu.Lock()
			if err != nil {
				if s.redisErr == nil {
					s.log.Warn("memory/cluster: Redis unreachable; writes are spooled until it is back", "err", err)
				}
				s.redisErr = err
				s.signal()
				s.mu.Unlock()
				retry = time.After(backoff)
				backoff = min(2*backoff, 2*time.Second)
				break
			}
			if s.redisErr != nil {
				s.log.Info("memory/cluster: Redis is back; applying the spooled writes")
			}
			s.redisErr = nil
			backoff = 50 * time.Millisecond
			s.waiting = s.waiting[len(batch):]
			s.signal()
			s.mu.Unlock()
		}
	}
}

// signal wakes everyone waiting on progress; the caller holds mu.
func (s *Store) signal() {
	close(s.progress)
	s.progress = make(chan struct{})
}

// evalBatch runs write.lua for each record in one pipeline. If the
// connection fails part way, the caller retries them all: write ids make
// the ones already applied answer with their first result.
func (s *Store) evalBatch(ctx context.Context, rs []*record) ([]reply, error) {
	args := make([]string, len(rs))
	reps := make([]reply, len(rs))
	for i, r := range rs {
		req, known, err := s.request(ctx, r)
		if err != nil {
			return nil, err
		}
		if !known {
			reps[i] = reply{Err: "nobranch"}
			continue
		}
		args[i] = req
	}
	for attempt := 0; ; attempt++ {
		pipe := s.rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(rs))
		for i, r := range rs {
			if args[i] != "" {
				cmds[i] = writeScript.EvalSha(ctx, pipe, nil, s.prefix, r.W, args[i])
			}
		}
		_, err := pipe.Exec(ctx)
		if err != nil && attempt == 0 && strings.Contains(err.Error(), "NOSCRIPT") {
			// A restarted Redis has forgotten the script.
			if err := writeScript.Load(ctx, s.rdb).Err(); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		for i, c := range cmds {
			if c == nil {
				continue
			}
			out, err := c.Text()
			if err != nil {
				return nil, err
			}
			if reps[i], err = parseReply(out, len(rs[i].Ops)); err != nil {
				return nil, err
			}
		}
		return reps, nil
	}
}

// request is the JSON write.lua reads for a record; known is false when
// the record's branch does not exist.
func (s *Store) request(ctx context.Context, r *record) (req string, known bool, err error) {
	var sc []scopeEntry
	if r.B != "" {
		if sc, err = s.scope(ctx, r.B); err != nil {
			if errors.Is(err, memory.ErrNoBranch) {
				return "", false, nil
			}
			return "", false, err
		}
	}
	var scope [][2]any
	for _, o := range r.Ops {
		if o.T == "arch" { // only archival dedup reads the scope
			scope = make([][2]any, len(sc))
			for i, e := range sc {
				scope[i] = [2]any{e.Branch, e.MaxSeq}
			}
			break
		}
	}
	data, err := json.Marshal(struct {
		TS    int64    `json:"ts"`
		Scope [][2]any `json:"scope,omitempty"`
		Ops   []op     `json:"ops"`
	}{r.TS, scope, r.Ops})
	return string(data), true, err
}

func parseReply(out string, ops int) (reply, error) {
	var rep reply
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		return reply{}, fmt.Errorf("memory/cluster: reply of write.lua: %w", err)
	}
	if rep.Err == "" && len(rep.R) != ops {
		return reply{}, fmt.Errorf("memory/cluster: write.lua answered %d results for %d ops", len(rep.R), ops)
	}
	return rep, nil
}

// eval runs write.lua for one record, outside the spool (forks).
func (s *Store) eval(ctx context.Context, r *record) (reply, error) {
	req, known, err := s.request(ctx, r)
	if err != nil {
		return reply{}, err
	}
	if !known {
		return reply{Err: "nobranch"}, nil
	}
	out, err := writeScript.Run(ctx, s.rdb, nil, s.prefix, r.W, req).Text()
	if err != nil {
		return reply{}, err
	}
	return parseReply(out, len(r.Ops))
}

// write spools a record for the applier and returns: the write is
// acknowledged once it is in the spool. Its seqs are assigned when the
// applier applies it to Redis; reads by this store wait for that. While
// Redis is away the record is fsync'd at once (no server holds it).
func (s *Store) write(ctx context.Context, r *record) error {
	if r.B != "" {
		// A write to a branch that does not exist is refused at once; one
		// whose branch cannot be looked up (Redis away) is spooled.
		if _, err := s.scope(ctx, r.B); errors.Is(err, memory.ErrNoBranch) {
			return err
		}
	}
	var id [12]byte
	_, _ = rand.Read(id[:])
	r.W = hex.EncodeToString(id[:])
	r.TS = s.now().UnixMilli()
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errors.New("memory/cluster: store closed")
	}
	if err := s.jr.Append(data); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("memory/cluster: spool: %w", err)
	}
	s.open++
	if s.redisErr != nil {
		// No server holds it: the spool is its only copy.
		if err := s.jr.Sync(); err != nil {
			s.mu.Unlock()
			return fmt.Errorf("memory/cluster: spool: %w", err)
		}
	}
	s.waiting = append(s.waiting, r)
	s.mu.Unlock()
	s.kick()
	return nil
}

func replyErr(rep reply, r *record) error {
	switch rep.Err {
	case "exists":
		return fmt.Errorf("%w: %q", memory.ErrBranchExists, r.Ops[0].B)
	case "noparent":
		return fmt.Errorf("%w: parent %q of %q", memory.ErrNoBranch, r.Ops[0].Parent, r.Ops[0].B)
	case "nobranch":
		return fmt.Errorf("%w: %q", memory.ErrNoBranch, r.B)
	}
	return fmt.Errorf("memory/cluster: write rejected: %s", rep.Err)
}

// rowsOf are the ClickHouse rows of an applied record.
func (s *Store) rowsOf(r *record, rep reply) chRows {
	rows := chRows{records: 1}
	for i, o := range r.Ops {
		res := rep.R[i]
		switch o.T {
		case "recall":
			rows.recall = append(rows.recall, recallRow{ev: memory.RecallEvent{Seq: res.S, TS: time.UnixMilli(o.TS).UTC(), Kind: o.Kind,
				NodeID: o.Node, Branch: o.B, Phase: o.Phase, Payload: o.Payload}})
		case "arch":
			if res.Dup != 0 {
				rows.hits = append(rows.hits, hitRow{seq: res.S, branch: o.B, target: res.Dup, tsMS: r.TS})
				continue
			}
			var tags []string
			_ = json.Unmarshal([]byte(o.Tags), &tags)
			if tags == nil {
				tags = []string{}
			}
			toks := memory.Tokenize(o.Text)
			terms := map[string]uint32{}
			for _, t := range toks {
				terms[t]++
			}
			rows.archival = append(rows.archival, archivalRow{seq: res.S, branch: o.B, text: o.Text, tags: tags, context: o.Ctx,
				factHash: o.Fact, episodeHash: o.Ep, docLen: uint32(len(toks)), tsMS: r.TS, terms: terms})
		}
	}
	return rows
}

// unavailable wraps err with ErrUnavailable when it says a server could
// not be reached, and names what failed either way.
func unavailable(what string, err error) error {
	if err == nil || errors.Is(err, memory.ErrNoBranch) || errors.Is(err, ErrUnavailable) {
		return err
	}
	if connErr(err) {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err)
	}
	return fmt.Errorf("memory/cluster: %s: %w", what, err)
}

// connErr: the error is about the connection, not the request.
func connErr(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"connection refused", "connection reset", "broken pipe", "i/o timeout", "LOADING", "acquire conn timeout", "bad connection"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// Branches.

func (s *Store) Fork(ctx context.Context, p memory.ForkParams) (memory.Branch, error) {
	if p.Branch == "" {
		return memory.Branch{}, fmt.Errorf("%w: Fork: empty branch id", memory.ErrInvalid)
	}
	if err := s.readable(ctx); err != nil {
		return memory.Branch{}, err
	}
	// A fork is not spooled: its caller needs its seq now. It carries a
	// write id all the same, so that a retry after a lost reply is refused
	// as ErrBranchExists rather than applied twice.
	var id [12]byte
	_, _ = rand.Read(id[:])
	r := &record{W: hex.EncodeToString(id[:]), TS: s.now().UnixMilli(), Ops: []op{{T: "fork", B: p.Branch, Parent: p.Parent}}}
	rep, err := s.eval(ctx, r)
	if err != nil {
		return memory.Branch{}, unavailable("fork "+p.Branch, err)
	}
	if rep.Err != "" {
		return memory.Branch{}, replyErr(rep, r)
	}
	b := memory.Branch{ID: p.Branch, Parent: p.Parent, ForkSeq: rep.R[0].S, Depth: rep.R[0].Depth, Created: time.UnixMilli(r.TS).UTC()}
	if _, err := s.scopes.Of(ctx, b); err != nil {
		return b, err
	}
	return b, nil
}

func (s *Store) BranchGet(ctx context.Context, id string) (memory.Branch, error) {
	if err := s.readable(ctx); err != nil {
		return memory.Branch{}, err
	}
	return s.branchGet(ctx, id)
}

// branchGet reads a branch record; the replayer uses it while reads wait.
func (s *Store) branchGet(ctx context.Context, id string) (memory.Branch, error) {
	m, err := s.rdb.HGetAll(ctx, s.prefix+"branch:"+id).Result()
	if err != nil {
		return memory.Branch{}, unavailable("read branch", err)
	}
	if len(m) == 0 {
		return memory.Branch{}, fmt.Errorf("%w: %q", memory.ErrNoBranch, id)
	}
	b := memory.Branch{ID: id, Parent: m["parent"]}
	b.ForkSeq, _ = strconv.ParseInt(m["fork_seq"], 10, 64)
	b.Depth, _ = strconv.Atoi(m["depth"])
	created, _ := strconv.ParseInt(m["created_ms"], 10, 64)
	b.Created = time.UnixMilli(created).UTC()
	return b, nil
}

// scope is the branch's visible set (memory.Scopes): itself unbounded,
// then each ancestor up to the seq at which the path forked from it.
func (s *Store) scope(ctx context.Context, id string) ([]scopeEntry, error) {
	return s.scopes.Get(ctx, id)
}

// readScope checks the store can serve a read of branch and returns its scope.
func (s *Store) readScope(ctx context.Context, branch string) ([]scopeEntry, error) {
	if err := s.readable(ctx); err != nil {
		return nil, err
	}
	return s.scope(ctx, branch)
}

// Core.

type coreVersion struct {
	S  int64  `json:"s"`
	K  string `json:"k"`
	V  string `json:"v"`
	I  int    `json:"i"`
	E  int64  `json:"e"`
	D  int    `json:"d"`
	TS int64  `json:"ts"`
}

func checkCoreSet(p *memory.CoreSetParams) error {
	if p.Key == "" {
		return fmt.Errorf("%w: CoreSet: empty key", memory.ErrInvalid)
	}
	if p.Importance == 0 {
		p.Importance = 3
	}
	if p.Importance < 1 || p.Importance > 5 {
		return fmt.Errorf("%w: CoreSet %s: importance %d, must be 1 to 5", memory.ErrInvalid, p.Key, p.Importance)
	}
	if p.TTL < 0 {
		return fmt.Errorf("%w: CoreSet %s: negative TTL", memory.ErrInvalid, p.Key)
	}
	return nil
}

func (s *Store) coreOp(branch string, p memory.CoreSetParams, now time.Time) op {
	var exp int64
	if p.TTL > 0 {
		exp = now.Add(p.TTL).UnixMilli()
	}
	return op{T: "core", B: branch, K: p.Key, V: p.Value, I: p.Importance, E: exp}
}

func (s *Store) CoreSet(ctx context.Context, p memory.CoreSetParams) (memory.CoreEntry, error) {
	if err := checkCoreSet(&p); err != nil {
		return memory.CoreEntry{}, err
	}
	now := s.now()
	r := &record{B: p.Branch, Ops: []op{s.coreOp(p.Branch, p, now)}}
	if err := s.write(ctx, r); err != nil {
		return memory.CoreEntry{}, err
	}
	// Seq 0: assigned when the spooled write is applied.
	e := memory.CoreEntry{Key: p.Key, Value: p.Value, Importance: p.Importance, Branch: p.Branch, Updated: time.UnixMilli(r.TS).UTC()}
	if r.Ops[0].E != 0 {
		e.Expires = time.UnixMilli(r.Ops[0].E).UTC()
	}
	return e, nil
}

func (s *Store) CoreDelete(ctx context.Context, p memory.CoreKeyParams) error {
	if p.Key == "" {
		return fmt.Errorf("%w: CoreDelete: empty key", memory.ErrInvalid)
	}
	return s.write(ctx, &record{B: p.Branch, Ops: []op{{T: "core", B: p.Branch, K: p.Key, D: 1}}})
}

// coreVersions reads the scope's core versions, nearest branch first.
func (s *Store) coreVersions(ctx context.Context, sc []scopeEntry) ([][]coreVersion, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringSliceCmd, len(sc))
	for i, e := range sc {
		cmds[i] = pipe.ZRangeByScore(ctx, s.prefix+"core:"+e.Branch, &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(e.MaxSeq, 10)})
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("read core", err)
	}
	out := make([][]coreVersion, len(sc))
	for i, c := range cmds {
		for _, m := range c.Val() {
			var v coreVersion
			if err := json.Unmarshal([]byte(m), &v); err != nil {
				return nil, fmt.Errorf("memory/cluster: core version: %w", err)
			}
			out[i] = append(out[i], v)
		}
	}
	return out, nil
}

// visibleCore resolves each key to its nearest visible version and keeps
// the live ones.
func (s *Store) visibleCore(ctx context.Context, branch string) ([]memory.CoreEntry, error) {
	sc, err := s.readScope(ctx, branch)
	if err != nil {
		return nil, err
	}
	vs, err := s.coreVersions(ctx, sc)
	if err != nil {
		return nil, err
	}
	now := s.now().UnixMilli()
	decided := map[string]bool{}
	var out []memory.CoreEntry
	for i, branchVersions := range vs {
		latest := map[string]coreVersion{} // ascending seq: the last wins
		for _, v := range branchVersions {
			latest[v.K] = v
		}
		for k, v := range latest {
			if decided[k] {
				continue
			}
			decided[k] = true
			if v.D == 1 || (v.E != 0 && v.E <= now) {
				continue
			}
			e := memory.CoreEntry{Key: k, Value: v.V, Importance: v.I, Branch: sc[i].Branch, Seq: v.S, Updated: time.UnixMilli(v.TS).UTC()}
			if v.E != 0 {
				e.Expires = time.UnixMilli(v.E).UTC()
			}
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func (s *Store) CoreGet(ctx context.Context, p memory.CoreKeyParams) (memory.CoreEntry, bool, error) {
	if p.Key == "" {
		return memory.CoreEntry{}, false, fmt.Errorf("%w: CoreGet: empty key", memory.ErrInvalid)
	}
	all, err := s.visibleCore(ctx, p.Branch)
	if err != nil {
		return memory.CoreEntry{}, false, err
	}
	for _, e := range all {
		if e.Key == p.Key {
			return e, true, nil
		}
	}
	return memory.CoreEntry{}, false, nil
}

func (s *Store) CoreList(ctx context.Context, p memory.CoreListParams) ([]memory.CoreEntry, error) {
	return s.visibleCore(ctx, p.Branch)
}

// Recall.

type recallVersion struct {
	S  int64  `json:"s"`
	TS int64  `json:"ts"`
	K  string `json:"k"`
	N  string `json:"n"`
	Ph string `json:"ph"`
	Pl string `json:"pl"`
}

func (s *Store) RecallAppend(ctx context.Context, p memory.RecallAppendParams) (memory.RecallEvent, error) {
	ev := p.Event
	if ev.Kind == "" {
		return ev, fmt.Errorf("%w: RecallAppend: empty kind", memory.ErrInvalid)
	}
	ev.Branch = p.Branch
	if ev.TS.IsZero() {
		ev.TS = s.now()
	}
	ev.TS = time.UnixMilli(ev.TS.UnixMilli()).UTC()
	r := &record{B: p.Branch, Ops: []op{{T: "recall", B: p.Branch, TS: ev.TS.UnixMilli(), Kind: ev.Kind, Node: ev.NodeID, Phase: ev.Phase, Payload: ev.Payload}}}
	if err := s.write(ctx, r); err != nil {
		return ev, err
	}
	return ev, nil // Seq 0: assigned when applied
}

func (s *Store) events(ctx context.Context, branch string, after int64, limit int, newest, total bool) ([]memory.RecallEvent, int, error) {
	sc, err := s.readScope(ctx, branch)
	if err != nil {
		return nil, 0, err
	}
	pipe := s.rdb.Pipeline()
	lists := make([]*redis.StringSliceCmd, len(sc))
	counts := make([]*redis.IntCmd, len(sc))
	for i, e := range sc {
		key := s.prefix + "recall:" + e.Branch
		rng := &redis.ZRangeBy{Min: "(" + strconv.FormatInt(after, 10), Max: strconv.FormatInt(e.MaxSeq, 10)}
		if limit > 0 {
			rng.Count = int64(limit)
		}
		if newest {
			lists[i] = pipe.ZRevRangeByScore(ctx, key, rng)
		} else {
			lists[i] = pipe.ZRangeByScore(ctx, key, rng)
		}
		if total {
			counts[i] = pipe.ZCount(ctx, key, rng.Min, rng.Max)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, 0, unavailable("read recall", err)
	}
	var out []memory.RecallEvent
	n := 0
	for i, c := range lists {
		for _, m := range c.Val() {
			var v recallVersion
			if err := json.Unmarshal([]byte(m), &v); err != nil {
				return nil, 0, fmt.Errorf("memory/cluster: recall event: %w", err)
			}
			out = append(out, memory.RecallEvent{Seq: v.S, TS: time.UnixMilli(v.TS).UTC(), Kind: v.K, NodeID: v.N, Branch: sc[i].Branch, Phase: v.Ph, Payload: v.Pl})
		}
		if total {
			n += int(counts[i].Val())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	if limit > 0 && len(out) > limit {
		if newest {
			out = out[len(out)-limit:]
		} else {
			out = out[:limit]
		}
	}
	return out, n, nil
}

func (s *Store) RecallList(ctx context.Context, p memory.RecallListParams) ([]memory.RecallEvent, int, error) {
	return s.events(ctx, p.Branch, p.AfterSeq, p.Limit, p.Newest, p.Total)
}

// RecallSearch ranks every visible event (BM25 over the visible set, as
// the SQLite store does); a branch sees its path's events, so the set is
// bounded by the path, not the run.
func (s *Store) RecallSearch(ctx context.Context, p memory.RecallSearchParams) ([]memory.RecallEvent, error) {
	evs, _, err := s.events(ctx, p.Branch, 0, 0, false, false)
	if err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 20
	}
	texts := make([]string, len(evs))
	seqs := make([]int64, len(evs))
	for i, e := range evs {
		texts[i] = e.Kind + " " + e.Phase + " " + e.Payload
		seqs[i] = e.Seq
	}
	idx, _ := memory.BM25Rank(texts, seqs, p.Query, limit)
	out := make([]memory.RecallEvent, len(idx))
	for i, k := range idx {
		out[i] = evs[k]
	}
	return out, nil
}

func (s *Store) RecallSummaryGet(ctx context.Context, branch string) (memory.RecallSummary, error) {
	sc, err := s.readScope(ctx, branch)
	if err != nil {
		return memory.RecallSummary{}, err
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringSliceCmd, len(sc))
	for i, e := range sc {
		cmds[i] = pipe.ZRevRangeByScore(ctx, s.prefix+"sum:"+e.Branch, &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(e.MaxSeq, 10), Count: 1})
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return memory.RecallSummary{}, unavailable("read recall summary", err)
	}
	for _, c := range cmds {
		if v := c.Val(); len(v) > 0 {
			var sum struct {
				Tx string `json:"tx"`
				F  int64  `json:"f"`
			}
			if err := json.Unmarshal([]byte(v[0]), &sum); err != nil {
				return memory.RecallSummary{}, fmt.Errorf("memory/cluster: recall summary: %w", err)
			}
			return memory.RecallSummary{Text: sum.Tx, FoldedSeq: sum.F}, nil
		}
	}
	return memory.RecallSummary{}, nil
}

func (s *Store) RecallSummarySet(ctx context.Context, p memory.RecallSummarySetParams) error {
	return s.write(ctx, &record{B: p.Branch, Ops: []op{{T: "sum", B: p.Branch, Text: p.Summary.Text, Folded: p.Summary.FoldedSeq}}})
}

// Archival.

func (s *Store) archOp(branch string, p memory.ArchivalWriteParams) op {
	fact := memory.FactHash(p.Text)
	tags := p.Tags
	if tags == nil {
		tags = []string{}
	}
	tj, _ := json.Marshal(tags)
	return op{T: "arch", B: branch, Text: p.Text, Fact: fact, Tags: string(tj), Ctx: p.Context, Ep: memory.EpisodeHash(fact, branch, p.Context),
		Len: len(memory.Tokenize(p.Text))}
}

func (s *Store) ArchivalWrite(ctx context.Context, p memory.ArchivalWriteParams) (memory.ArchivalItem, bool, error) {
	if strings.TrimSpace(p.Text) == "" {
		return memory.ArchivalItem{}, false, fmt.Errorf("%w: ArchivalWrite: empty text", memory.ErrInvalid)
	}
	o := s.archOp(p.Branch, p)
	r := &record{B: p.Branch, Ops: []op{o}}
	if err := s.write(ctx, r); err != nil {
		return memory.ArchivalItem{}, false, err
	}
	// Acknowledged in the spool: whether the fact was already visible is
	// decided (and a repeat counted) when the write is applied.
	ts := time.UnixMilli(r.TS).UTC()
	tags := p.Tags
	if tags == nil {
		tags = []string{}
	}
	return memory.ArchivalItem{Branch: p.Branch, Text: p.Text, Tags: tags, Context: p.Context, FactHash: o.Fact, EpisodeHash: o.Ep,
		Count: 1, FirstSeen: ts, LastSeen: ts}, false, nil
}

func (f *factItem) item() memory.ArchivalItem {
	var tags []string
	_ = json.Unmarshal([]byte(f.Tg), &tags)
	if tags == nil {
		tags = []string{}
	}
	ts := time.UnixMilli(f.TS).UTC()
	return memory.ArchivalItem{Seq: f.S, Branch: f.B, Text: f.Tx, Tags: tags, Context: f.C, FactHash: f.F, EpisodeHash: f.Ep, FirstSeen: ts, LastSeen: ts, Count: 1}
}

// candidateFactor: how many BM25 candidates per result are re-ranked with
// recency and frequency (as in the SQLite store).
const candidateFactor = 4

// ArchivalSearch reads the visible postings of the query terms and the
// visible set's statistics from ClickHouse (two queries at once), ranks by
// BM25 over the visible set, then reads the best candidates' texts and
// repeats from Redis and re-ranks them with memory.Rank.
func (s *Store) ArchivalSearch(ctx context.Context, p memory.ArchivalSearchParams) ([]memory.ArchivalItem, error) {
	sc, err := s.readScope(ctx, p.Branch)
	if err != nil {
		return nil, err
	}
	terms := memory.QueryTerms(p.Query)
	if len(terms) == 0 {
		return nil, nil
	}
	k := p.K
	if k <= 0 {
		k = 8
	}
	if err := s.ship.flush(ctx); err != nil {
		return nil, fmt.Errorf("%w: archival search needs ClickHouse: %w", ErrUnavailable, err)
	}
	var docs, sumLen uint64
	var statsErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		docs, sumLen, statsErr = s.stats(ctx, sc)
	}()
	ps, err := s.ship.postings(ctx, sc, terms)
	<-done
	if err == nil {
		err = statsErr
	}
	if err != nil {
		return nil, unavailable("archival search", err)
	}
	if docs == 0 || len(ps) == 0 {
		return nil, nil
	}
	ranked := bm25(ps, docs, sumLen)
	now := s.now()
	want := k * candidateFactor
	var out []memory.ArchivalItem
	// Tags filter after ranking: read candidates in chunks until enough pass.
	for start := 0; start < len(ranked) && len(out) < want; start += want {
		chunk := ranked[start:min(len(ranked), start+want)]
		items, err := s.items(ctx, sc, chunk)
		if err != nil {
			return nil, err
		}
		for i, it := range items {
			if it.Seq == 0 || (len(p.Tags) > 0 && !memory.HasTags(it.Tags, p.Tags)) {
				continue
			}
			it.BM25 = chunk[i].bm25
			it.Score = memory.Rank(it.BM25, it.LastSeen, it.Count, now)
			out = append(out, it)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Score > out[j].Score })
	if len(out) > k {
		out = out[:k]
	}
	return out, nil
}

type candidate struct {
	seq  int64
	bm25 float64
}

// stats are the visible set's document count and total length in terms,
// for BM25: per scope entry, the running totals of its branch up to the
// entry's bound (dl:<branch>, kept by write.lua), in one pipeline.
func (s *Store) stats(ctx context.Context, sc []scopeEntry) (docs, sumLen uint64, err error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringSliceCmd, len(sc))
	for i, e := range sc {
		cmds[i] = pipe.ZRevRangeByScore(ctx, s.prefix+"dl:"+e.Branch, &redis.ZRangeBy{Max: strconv.FormatInt(e.MaxSeq, 10), Min: "-inf", Count: 1})
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, 0, err
	}
	for _, c := range cmds {
		v := c.Val()
		if len(v) == 0 {
			continue
		}
		parts := strings.Split(v[0], ":")
		if len(parts) != 3 {
			return 0, 0, fmt.Errorf("memory/cluster: archival statistics %q", v[0])
		}
		n, err1 := strconv.ParseUint(parts[1], 10, 64)
		l, err2 := strconv.ParseUint(parts[2], 10, 64)
		if err1 != nil || err2 != nil {
			return 0, 0, fmt.Errorf("memory/cluster: archival statistics %q", v[0])
		}
		docs += n
		sumLen += l
	}
	return docs, sumLen, nil
}

// bm25 scores the documents of the postings, best first (ties: newest).
func bm25(ps []posting, docs, sumLen uint64) []candidate {
	avg := float64(sumLen) / float64(docs)
	df := map[string]int{}
	for _, p := range ps {
		df[p.term]++
	}
	scores := map[int64]float64{}
	for _, p := range ps {
		scores[p.seq] += memory.BM25Term(memory.BM25IDF(int(docs), df[p.term]), int(p.tf), int(p.docLen), avg)
	}
	out := make([]candidate, 0, len(scores))
	for seq, sc := range scores {
		out = append(out, candidate{seq, sc})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].bm25 != out[j].bm25 {
			return out[i].bm25 > out[j].bm25
		}
		return out[i].seq > out[j].seq
	})
	return out
}

// items reads candidates' texts and their visible repeats from Redis in one
// pipeline; a candidate Redis does not know comes back with seq 0.
func (s *Store) items(ctx context.Context, sc []scopeEntry, cands []candidate) ([]memory.ArchivalItem, error) {
	seqs := make([]string, len(cands))
	targets := make([]int64, len(cands))
	for i, c := range cands {
		seqs[i] = strconv.FormatInt(c.seq, 10)
		targets[i] = c.seq
	}
	pipe := s.rdb.Pipeline()
	get := pipe.HMGet(ctx, s.prefix+"items", seqs...)
	hits := make([]*redis.StringSliceCmd, len(cands))
	for i, q := range seqs {
		hits[i] = pipe.ZRange(ctx, s.prefix+"hits:"+q, 0, -1)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("read archival items", err)
	}
	maxSeq := map[string]int64{}
	for _, e := range sc {
		maxSeq[e.Branch] = e.MaxSeq
	}
	out := make([]memory.ArchivalItem, len(cands))
	for i, v := range get.Val() {
		str, ok := v.(string)
		if !ok {
			continue
		}
		var f factItem
		if err := json.Unmarshal([]byte(str), &f); err != nil {
			return nil, fmt.Errorf("memory/cluster: archival item %s: %w", seqs[i], err)
		}
		it := f.item()
		last := it.FirstSeen.UnixMilli()
		for _, m := range hits[i].Val() {
			seq, branch, ts, ok := parseHit(m)
			if mx, vis := maxSeq[branch]; ok && vis && seq <= mx {
				it.Count++
				last = max(last, ts)
			}
		}
		it.LastSeen = time.UnixMilli(last).UTC()
		out[i] = it
	}
	return out, nil
}

// parseHit splits a hits member "seq|branch|ts".
func parseHit(m string) (seq int64, branch string, ts int64, ok bool) {
	i, j := strings.IndexByte(m, '|'), strings.LastIndexByte(m, '|')
	if i < 0 || j <= i {
		return 0, "", 0, false
	}
	seq, err1 := strconv.ParseInt(m[:i], 10, 64)
	ts, err2 := strconv.ParseInt(m[j+1:], 10, 64)
	return seq, m[i+1 : j], ts, err1 == nil && err2 == nil
}

// Apply writes a batch atomically: write.lua validates every op before it
// writes any.
func (s *Store) Apply(ctx context.Context, p memory.ApplyParams) error {
	now := s.now()
	r := &record{B: p.Branch}
	for _, c := range p.CoreSets {
		if err := checkCoreSet(&c); err != nil {
			return err
		}
		r.Ops = append(r.Ops, s.coreOp(p.Branch, c, now))
	}
	for _, k := range p.CoreDeletes {
		if k == "" {
			return fmt.Errorf("%w: CoreDelete: empty key", memory.ErrInvalid)
		}
		r.Ops = append(r.Ops, op{T: "core", B: p.Branch, K: k, D: 1})
	}
	for _, a := range p.Archival {
		if strings.TrimSpace(a.Text) == "" {
			return fmt.Errorf("%w: ArchivalWrite: empty text", memory.ErrInvalid)
		}
		r.Ops = append(r.Ops, s.archOp(p.Branch, a))
	}
	if len(r.Ops) == 0 {
		if _, err := s.readScope(ctx, p.Branch); err != nil {
			return err
		}
		return nil
	}
	return s.write(ctx, r)
}

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
