package cluster

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hpcq/hpcq/pkg/memory"
)

// ErrPurged: the run's memory was removed from Redis (RemoveRun).
var ErrPurged = errors.New("memory/cluster: the run's memory was removed from Redis")

// purgedKey marks a run whose keys RemoveRun removed; it stays, so that
// Open says so instead of finding an empty run.
const purgedKey = "purged"

// checkPurged fails Open on a run whose memory was purged.
func (s *Store) checkPurged(ctx context.Context) error {
	v, err := s.rdb.Get(ctx, s.prefix+purgedKey).Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return unavailable("read the run's state", err)
	}
	return fmt.Errorf("%w: run %s, %s", ErrPurged, s.run, v)
}

// globEscape escapes the characters SCAN MATCH reads as a pattern.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// scanKeys calls fn with the keys under prefix matching pattern (after the
// prefix), a batch at a time. SCAN walks the whole keyspace: Rows and
// RemoveRun are an administrator's, once per run.
func scanKeys(ctx context.Context, rdb *redis.Client, prefix, pattern string, fn func(keys []string) error) error {
	var cursor uint64
	for {
		keys, next, err := rdb.Scan(ctx, cursor, globEscape(prefix)+pattern, 1000).Result()
		if err != nil {
			return unavailable("scan the run's keys", err)
		}
		if len(keys) > 0 {
			if err := fn(keys); err != nil {
				return err
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// Rows reads every write of the run from Redis, with its seq (memory.Rows),
// once this store's own writes are applied: what moving the run's memory
// into another store carries. Nothing is read from ClickHouse.
func (s *Store) Rows(ctx context.Context) (memory.Rows, error) {
	if err := s.readable(ctx); err != nil {
		return memory.Rows{}, err
	}
	var ids []string
	err := scanKeys(ctx, s.rdb, s.prefix, "branch:*", func(keys []string) error {
		for _, k := range keys {
			ids = append(ids, strings.TrimPrefix(k, s.prefix+"branch:"))
		}
		return nil
	})
	if err != nil {
		return memory.Rows{}, err
	}
	slices.Sort(ids)
	ids = slices.Compact(ids) // SCAN may return a key twice
	var rows memory.Rows
	for chunk := range slices.Chunk(ids, 256) {
		if err := s.branchRows(ctx, chunk, &rows); err != nil {
			return memory.Rows{}, err
		}
	}
	if err := s.archivalRows(ctx, &rows); err != nil {
		return memory.Rows{}, err
	}
	slices.SortFunc(rows.Branches, func(a, b memory.Branch) int { return cmp.Compare(a.ForkSeq, b.ForkSeq) })
	slices.SortFunc(rows.Core, func(a, b memory.CoreVersion) int { return cmp.Compare(a.Seq, b.Seq) })
	slices.SortFunc(rows.Recall, func(a, b memory.RecallEvent) int { return cmp.Compare(a.Seq, b.Seq) })
	slices.SortFunc(rows.Summaries, func(a, b memory.SummaryVersion) int { return cmp.Compare(a.Seq, b.Seq) })
	slices.SortFunc(rows.Archival, func(a, b memory.ArchivalItem) int { return cmp.Compare(a.Seq, b.Seq) })
	slices.SortFunc(rows.Hits, func(a, b memory.ArchivalHit) int { return cmp.Compare(a.Seq, b.Seq) })
	return rows, nil
}

// branchRows reads the records, core versions, recall events and summaries
// of the branches ids in one pipeline.
func (s *Store) branchRows(ctx context.Context, ids []string, rows *memory.Rows) error {
	pipe := s.rdb.Pipeline()
	type reads struct {
		branch            *redis.MapStringStringCmd
		core, recall, sum *redis.StringSliceCmd
	}
	rs := make([]reads, len(ids))
	for i, id := range ids {
		rs[i] = reads{
			branch: pipe.HGetAll(ctx, s.prefix+"branch:"+id),
			core:   pipe.ZRange(ctx, s.prefix+"core:"+id, 0, -1),
			recall: pipe.ZRange(ctx, s.prefix+"recall:"+id, 0, -1),
			sum:    pipe.ZRange(ctx, s.prefix+"sum:"+id, 0, -1),
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return unavailable("read the run's branches", err)
	}
	for i, id := range ids {
		m := rs[i].branch.Val()
		if len(m) == 0 {
			continue // gone meanwhile
		}
		b := memory.Branch{ID: id, Parent: m["parent"]}
		var err error
		if b.ForkSeq, err = strconv.ParseInt(m["fork_seq"], 10, 64); err != nil {
			return fmt.Errorf("memory/cluster: branch %s: fork_seq %q", id, m["fork_seq"])
		}
		if b.Depth, err = strconv.Atoi(m["depth"]); err != nil {
			return fmt.Errorf("memory/cluster: branch %s: depth %q", id, m["depth"])
		}
		created, _ := strconv.ParseInt(m["created_ms"], 10, 64)
		b.Created = time.UnixMilli(created).UTC()
		rows.Branches = append(rows.Branches, b)
		for _, js := range rs[i].core.Val() {
			var v coreVersion
			if err := json.Unmarshal([]byte(js), &v); err != nil {
				return fmt.Errorf("memory/cluster: core version of %s: %w", id, err)
			}
			cv := memory.CoreVersion{CoreEntry: memory.CoreEntry{Key: v.K, Value: v.V, Importance: v.I, Branch: id, Seq: v.S,
				Updated: time.UnixMilli(v.TS).UTC()}, Deleted: v.D == 1}
			if v.E != 0 {
				cv.Expires = time.UnixMilli(v.E).UTC()
			}
			rows.Core = append(rows.Core, cv)
		}
		for _, js := range rs[i].recall.Val() {
			var v recallVersion
			if err := json.Unmarshal([]byte(js), &v); err != nil {
				return fmt.Errorf("memory/cluster: recall event of %s: %w", id, err)
			}
			rows.Recall = append(rows.Recall, memory.RecallEvent{Seq: v.S, TS: time.UnixMilli(v.TS).UTC(), Kind: v.K, NodeID: v.N,
				Branch: id, Phase: v.Ph, Payload: v.Pl})
		}
		for _, js := range rs[i].sum.Val() {
			var v struct {
				S  int64  `json:"s"`
				Tx string `json:"tx"`
				F  int64  `json:"f"`
			}
			if err := json.Unmarshal([]byte(js), &v); err != nil {
				return fmt.Errorf("memory/cluster: recall summary of %s: %w", id, err)
			}
			rows.Summaries = append(rows.Summaries, memory.SummaryVersion{Seq: v.S, Branch: id, Summary: memory.RecallSummary{Text: v.Tx, FoldedSeq: v.F}})
		}
	}
	return nil
}

// archivalRows reads the run's archival texts (HSCAN of its items) and
// the repeats of each.
func (s *Store) archivalRows(ctx context.Context, rows *memory.Rows) error {
	var cursor uint64
	for {
		kv, next, err := s.rdb.HScan(ctx, s.prefix+"items", cursor, "", 512).Result()
		if err != nil {
			return unavailable("read the run's archival texts", err)
		}
		pipe := s.rdb.Pipeline()
		var hits []*redis.ZSliceCmd
		for i := 0; i+1 < len(kv); i += 2 {
			var f factItem
			if err := json.Unmarshal([]byte(kv[i+1]), &f); err != nil {
				return fmt.Errorf("memory/cluster: archival item %s: %w", kv[i], err)
			}
			it := f.item()
			it.Count, it.LastSeen = 0, time.Time{}
			rows.Archival = append(rows.Archival, it)
			hits = append(hits, pipe.ZRangeWithScores(ctx, s.prefix+"hits:"+kv[i], 0, -1))
		}
		if len(hits) > 0 {
			if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
				return unavailable("read the run's archival repeats", err)
			}
		}
		for j, c := range hits {
			target := rows.Archival[len(rows.Archival)-len(hits)+j].Seq
			for _, z := range c.Val() {
				m, _ := z.Member.(string)
				// "seq|branch|ts" (write.lua); the branch may hold '|'.
				first, last := strings.Index(m, "|"), strings.LastIndex(m, "|")
				if first < 0 || last == first {
					return fmt.Errorf("memory/cluster: repeat %q of archival item %d", m, target)
				}
				ts, err := strconv.ParseInt(m[last+1:], 10, 64)
				if err != nil {
					return fmt.Errorf("memory/cluster: repeat %q of archival item %d", m, target)
				}
				rows.Hits = append(rows.Hits, memory.ArchivalHit{Seq: int64(z.Score), Branch: m[first+1 : last], Target: target, TS: time.UnixMilli(ts).UTC()})
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// RemoveRun removes every key of the run o.Run from Redis (its ClickHouse
// rows stay) and leaves a marker, set first, so that Open fails from then
// on with ErrPurged and note (where the memory went). Only the Redis
// settings of o are used. Called again on a run it marked, it removes what
// an interrupted call left; the first marker stays. It returns how many
// keys it removed. No process may be writing to the run: a store of the
// run is flushed and closed first (Close).
func RemoveRun(ctx context.Context, o Options, note string) (int, error) {
	if err := checkRun(o.Run); err != nil {
		return 0, err
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	rdb, err := dialRedis(ctx, o)
	if err != nil {
		return 0, err
	}
	defer rdb.Close()
	prefix := "hpcq:{" + o.Run + "}:"
	marker := "removed " + o.Now().UTC().Format(time.RFC3339)
	if note != "" {
		marker += "; " + note
	}
	if err := rdb.SetNX(ctx, prefix+purgedKey, marker, 0).Err(); err != nil {
		return 0, unavailable("mark the run removed", err)
	}
	n := 0
	err = scanKeys(ctx, rdb, prefix, "*", func(keys []string) error {
		keys = slices.DeleteFunc(keys, func(k string) bool { return k == prefix+purgedKey })
		if len(keys) == 0 {
			return nil
		}
		removed, err := rdb.Unlink(ctx, keys...).Result()
		if err != nil {
			return unavailable("remove the run's keys", err)
		}
		n += int(removed)
		return nil
	})
	return n, err
}
