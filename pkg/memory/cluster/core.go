package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hpcq/hpcq/pkg/memory"
)

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

// queueCore queues the read of the scope's core versions, nearest branch
// first; coreOf resolves them once the pipeline has run.
func (s *Store) queueCore(ctx context.Context, pipe redis.Pipeliner, sc []scopeEntry) []*redis.StringSliceCmd {
	cmds := make([]*redis.StringSliceCmd, len(sc))
	for i, e := range sc {
		cmds[i] = pipe.ZRangeByScore(ctx, s.prefix+"core:"+e.Branch, &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(e.MaxSeq, 10)})
	}
	return cmds
}

// coreOf resolves each key to its nearest visible version and keeps the
// live ones, by key.
func (s *Store) coreOf(sc []scopeEntry, cmds []*redis.StringSliceCmd) ([]memory.CoreEntry, error) {
	now := s.now().UnixMilli()
	decided := map[string]bool{}
	var out []memory.CoreEntry
	for i, c := range cmds {
		latest := map[string]coreVersion{} // ascending seq: the last wins
		for _, m := range c.Val() {
			var v coreVersion
			if err := json.Unmarshal([]byte(m), &v); err != nil {
				return nil, fmt.Errorf("memory/cluster: core version: %w", err)
			}
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

// visibleCore is the branch's visible live core entries, by key.
func (s *Store) visibleCore(ctx context.Context, branch string) ([]memory.CoreEntry, error) {
	sc, err := s.readScope(ctx, branch)
	if err != nil {
		return nil, err
	}
	pipe := s.rdb.Pipeline()
	cmds := s.queueCore(ctx, pipe, sc)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("read core", err)
	}
	return s.coreOf(sc, cmds)
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
