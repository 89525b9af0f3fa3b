package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hpcq/hpcq/pkg/memory"
)

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
	r := s.queueEvents(ctx, pipe, sc, after, limit, newest, total)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, 0, unavailable("read recall", err)
	}
	return r.result()
}

// eventsRead is a read of a scope's recall events queued on a pipeline;
// result decodes it once the pipeline has run.
type eventsRead struct {
	sc            []scopeEntry
	lists         []*redis.StringSliceCmd
	counts        []*redis.IntCmd
	limit         int
	newest, total bool
}

func (s *Store) queueEvents(ctx context.Context, pipe redis.Pipeliner, sc []scopeEntry, after int64, limit int, newest, total bool) *eventsRead {
	r := &eventsRead{sc: sc, lists: make([]*redis.StringSliceCmd, len(sc)), limit: limit, newest: newest, total: total}
	if total {
		r.counts = make([]*redis.IntCmd, len(sc))
	}
	for i, e := range sc {
		key := s.prefix + "recall:" + e.Branch
		rng := &redis.ZRangeBy{Min: "(" + strconv.FormatInt(after, 10), Max: strconv.FormatInt(e.MaxSeq, 10)}
		if limit > 0 {
			rng.Count = int64(limit)
		}
		if newest {
			r.lists[i] = pipe.ZRevRangeByScore(ctx, key, rng)
		} else {
			r.lists[i] = pipe.ZRangeByScore(ctx, key, rng)
		}
		if total {
			r.counts[i] = pipe.ZCount(ctx, key, rng.Min, rng.Max)
		}
	}
	return r
}

func (r *eventsRead) result() ([]memory.RecallEvent, int, error) {
	var out []memory.RecallEvent
	n := 0
	for i, c := range r.lists {
		for _, m := range c.Val() {
			var v recallVersion
			if err := json.Unmarshal([]byte(m), &v); err != nil {
				return nil, 0, fmt.Errorf("memory/cluster: recall event: %w", err)
			}
			out = append(out, memory.RecallEvent{Seq: v.S, TS: time.UnixMilli(v.TS).UTC(), Kind: v.K, NodeID: v.N, Branch: r.sc[i].Branch, Phase: v.Ph, Payload: v.Pl})
		}
		if r.total {
			n += int(r.counts[i].Val())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	if r.limit > 0 && len(out) > r.limit {
		if r.newest {
			out = out[len(out)-r.limit:]
		} else {
			out = out[:r.limit]
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
	cmds := s.queueSummary(ctx, pipe, sc)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return memory.RecallSummary{}, unavailable("read recall summary", err)
	}
	return summaryOf(cmds)
}

// queueSummary queues the read of the latest summary of each scope entry;
// summaryOf takes the nearest one once the pipeline has run.
func (s *Store) queueSummary(ctx context.Context, pipe redis.Pipeliner, sc []scopeEntry) []*redis.StringSliceCmd {
	cmds := make([]*redis.StringSliceCmd, len(sc))
	for i, e := range sc {
		cmds[i] = pipe.ZRevRangeByScore(ctx, s.prefix+"sum:"+e.Branch, &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(e.MaxSeq, 10), Count: 1})
	}
	return cmds
}

func summaryOf(cmds []*redis.StringSliceCmd) (memory.RecallSummary, error) {
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

// RecallUnfolded reads the scope's summaries and the seqs (scores, not the
// events) of each scope entry's newest limit events in one pipeline; the
// events past the summary are the newest of all, so counting those among
// the newest limit counts them up to limit.
func (s *Store) RecallUnfolded(ctx context.Context, branch string, limit int) (memory.RecallSummary, int, error) {
	sc, err := s.readScope(ctx, branch)
	if err != nil {
		return memory.RecallSummary{}, 0, err
	}
	limit = max(limit, 0)
	pipe := s.rdb.Pipeline()
	sums := s.queueSummary(ctx, pipe, sc)
	seqs := make([]*redis.ZSliceCmd, 0, len(sc))
	if limit > 0 {
		for _, e := range sc {
			seqs = append(seqs, pipe.ZRevRangeByScoreWithScores(ctx, s.prefix+"recall:"+e.Branch,
				&redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(e.MaxSeq, 10), Count: int64(limit)}))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return memory.RecallSummary{}, 0, unavailable("read the recall window", err)
	}
	sum, err := summaryOf(sums)
	if err != nil {
		return memory.RecallSummary{}, 0, err
	}
	var newest []int64
	for _, c := range seqs {
		for _, z := range c.Val() {
			newest = append(newest, int64(z.Score))
		}
	}
	slices.Sort(newest)
	newest = newest[max(len(newest)-limit, 0):]
	n := 0
	for _, q := range newest {
		if q > sum.FoldedSeq {
			n++
		}
	}
	return sum, n, nil
}

// View reads the branch's visible core (when asked), its summary and its
// newest events in one pipeline: one round trip instead of three.
func (s *Store) View(ctx context.Context, p memory.ViewParams) (memory.View, error) {
	sc, err := s.readScope(ctx, p.Branch)
	if err != nil {
		return memory.View{}, err
	}
	pipe := s.rdb.Pipeline()
	var core []*redis.StringSliceCmd
	if p.Core {
		core = s.queueCore(ctx, pipe, sc)
	}
	sums := s.queueSummary(ctx, pipe, sc)
	evs := s.queueEvents(ctx, pipe, sc, 0, p.Events, true, false)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return memory.View{}, unavailable("read a view", err)
	}
	var v memory.View
	if p.Core {
		if v.Core, err = s.coreOf(sc, core); err != nil {
			return memory.View{}, err
		}
	}
	if v.Summary, err = summaryOf(sums); err != nil {
		return memory.View{}, err
	}
	if v.Events, _, err = evs.result(); err != nil {
		return memory.View{}, err
	}
	return v, nil
}

func (s *Store) RecallSummarySet(ctx context.Context, p memory.RecallSummarySetParams) error {
	return s.write(ctx, &record{B: p.Branch, Ops: []op{{T: "sum", B: p.Branch, Text: p.Summary.Text, Folded: p.Summary.FoldedSeq}}})
}
