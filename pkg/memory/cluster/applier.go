package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hpcq/hpcq/pkg/memory"
)

// The write path: a write is acknowledged once its record is in the spool;
// the applier sends records to Redis in pipelines of Lua scripts, and their
// rows are shipped to ClickHouse.

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
				// Rows go to the shipper before the writes count as applied:
				// a Flush that waited for them then ships their rows too.
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
	ops := r.Ops
	for i, o := range r.Ops {
		if o.T != "arch" {
			continue
		}
		if scope == nil { // only archival dedup reads the scope
			scope = make([][2]any, len(sc))
			for i, e := range sc {
				scope[i] = [2]any{e.Branch, e.MaxSeq}
			}
			ops = append([]op(nil), r.Ops...)
		}
		ops[i].Tm, _ = termFreqs(o.Text)
	}
	data, err := json.Marshal(struct {
		TS    int64    `json:"ts"`
		Scope [][2]any `json:"scope,omitempty"`
		Ops   []op     `json:"ops"`
	}{r.TS, scope, ops})
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
			rows.archival = append(rows.archival, archivalRow{seq: res.S, branch: o.B, text: o.Text, tags: tags, context: o.Ctx,
				factHash: o.Fact, episodeHash: o.Ep, docLen: uint32(o.Len), tsMS: r.TS})
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
