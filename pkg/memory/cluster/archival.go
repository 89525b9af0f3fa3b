package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hpcq/hpcq/internal/jsonw"
	"github.com/hpcq/hpcq/pkg/memory"
)

func (s *Store) archOp(branch string, p memory.ArchivalWriteParams) op {
	fact := memory.FactHash(p.Text)
	tags := p.Tags
	if tags == nil {
		tags = []string{}
	}
	return op{T: "arch", B: branch, Text: p.Text, Fact: fact, Tags: string(jsonw.AppendStrings(nil, tags)), Ctx: p.Context,
		Ep: memory.EpisodeHash(fact, branch, p.Context), Len: memory.CountTerms(p.Text)}
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

// termFreqs are the frequencies of text's terms (memory.Terms), its
// postings in the term index, and its length in terms.
func termFreqs(text string) (tf map[string]int, n int) {
	tf = map[string]int{}
	for t := range memory.Terms(text) {
		tf[t]++
		n++
	}
	return tf, n
}

// indexVersion marks a run whose indexes are all in Redis and kept by
// write.lua: "1", the term index; "2", also the repeats by branch. Open
// builds what a run written before lacks, once (buildIndex).
const indexVersion = "2"

// buildIndex brings a run written before up to indexVersion: the postings
// of every archival text of the run that Redis holds (a run without an
// index), then the repeats by branch of every item repeated, then marks
// the run. A build racing with writes, with another process's build, or
// cut short and run again may append a posting twice (readers drop the
// copies: postings); the repeats of an item are rebuilt in one script, so
// they are right whatever ran at the same time.
func (s *Store) buildIndex(ctx context.Context) error {
	key := s.prefix + "index"
	v, err := s.rdb.Get(ctx, key).Result()
	if err == nil && v == indexVersion {
		return nil
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	// A run without archival items (every new run) has nothing to index:
	// its writes keep the indexes (write.lua), and a repeat needs an item.
	// It is marked at once.
	n, err := s.rdb.Exists(ctx, s.prefix+"items").Result()
	if err != nil {
		return err
	}
	if n == 0 {
		return s.rdb.Set(ctx, key, indexVersion, 0).Err()
	}
	if v != "1" {
		if err := s.buildTermIndex(ctx); err != nil {
			return err
		}
	}
	if err := s.buildRepeatIndex(ctx); err != nil {
		return err
	}
	return s.rdb.Set(ctx, key, indexVersion, 0).Err()
}

// buildTermIndex writes the postings of every archival text of the run.
func (s *Store) buildTermIndex(ctx context.Context) error {
	start, texts := time.Now(), 0
	var cursor uint64
	for {
		kv, next, err := s.rdb.HScan(ctx, s.prefix+"items", cursor, "", 512).Result()
		if err != nil {
			return err
		}
		pipe := s.rdb.Pipeline()
		for i := 0; i+1 < len(kv); i += 2 {
			var f factItem
			if err := json.Unmarshal([]byte(kv[i+1]), &f); err != nil {
				return fmt.Errorf("archival item %s: %w", kv[i], err)
			}
			tfs, n := termFreqs(f.Tx)
			for term, tf := range tfs {
				pipe.Append(ctx, s.prefix+"t:"+f.B+":"+term, fmt.Sprintf("%d:%d:%d ", f.S, tf, n))
			}
			texts++
		}
		if pipe.Len() > 0 {
			if _, err := pipe.Exec(ctx); err != nil {
				return err
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	if texts > 0 {
		s.log.Info("memory/cluster: built the archival term index in Redis", "texts", texts, "took", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// buildRepeatIndex indexes the repeats of every repeated item by branch.
// It walks the run's items (hits.lua skips those never repeated), not the
// keyspace: a SCAN for the run's hits:* keys walks every run's keys.
func (s *Store) buildRepeatIndex(ctx context.Context) error {
	start, repeats := time.Now(), int64(0)
	var cursor uint64
	for {
		kv, next, err := s.rdb.HScan(ctx, s.prefix+"items", cursor, "", 512).Result()
		if err != nil {
			return err
		}
		args := []any{s.prefix}
		for i := 0; i+1 < len(kv); i += 2 {
			args = append(args, kv[i])
		}
		if len(args) > 1 {
			n, err := hitsScript.Run(ctx, s.rdb, nil, args...).Int64()
			if err != nil {
				return fmt.Errorf("repeats by branch: %w", err)
			}
			repeats += n
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	if repeats > 0 {
		s.log.Info("memory/cluster: indexed the repeats of archival texts by branch in Redis", "repeats", repeats, "took", time.Since(start).Round(time.Millisecond))
	}
	return nil
}
