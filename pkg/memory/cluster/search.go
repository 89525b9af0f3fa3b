package cluster

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hpcq/hpcq/pkg/memory"
)

// Archival search: BM25 over the visible postings.

// candidateFactor: how many BM25 candidates per result are re-ranked with
// recency and frequency (as in the SQLite store).
const candidateFactor = 4

// ArchivalSearch reads the visible postings of the query terms and the
// visible set's statistics from Redis in one pipeline, ranks by BM25 over
// the visible set, then reads the best candidates' texts and repeats from
// Redis and re-ranks them with memory.Rank. ClickHouse is not on the path:
// a search sees every write Redis has applied, and this store's own writes
// (readable waits for them).
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
	ps, docs, sumLen, err := s.postings(ctx, sc, terms)
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
			it.Score = memory.Rank(it.BM25, it.LastSeen, it.Count, now, s.halfLife)
			out = append(out, it)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Score > out[j].Score })
	if len(out) > k {
		out = out[:k]
	}
	return out, nil
}

// posting is one (term, text) entry of the term index: the term's
// frequency in the text and the text's length in terms.
type posting struct {
	term   string
	seq    int64
	tf     uint32
	docLen uint32
}

// postings reads, in one pipeline, the postings of terms in every scope
// entry (t:<branch>:<term>, kept up to the entry's bound) and the visible
// set's document count and total length (dl:<branch>: per entry, the
// running totals of its branch at the bound, kept by write.lua).
func (s *Store) postings(ctx context.Context, sc []scopeEntry, terms []string) (ps []posting, docs, sumLen uint64, err error) {
	pipe := s.rdb.Pipeline()
	stats := make([]*redis.StringSliceCmd, len(sc))
	lists := make([]*redis.StringCmd, 0, len(sc)*len(terms))
	for i, e := range sc {
		stats[i] = pipe.ZRevRangeByScore(ctx, s.prefix+"dl:"+e.Branch, &redis.ZRangeBy{Max: strconv.FormatInt(e.MaxSeq, 10), Min: "-inf", Count: 1})
		for _, t := range terms {
			lists = append(lists, pipe.Get(ctx, s.prefix+"t:"+e.Branch+":"+t))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, 0, 0, err
	}
	for _, c := range stats {
		v := c.Val()
		if len(v) == 0 {
			continue
		}
		_, n, l, ok := parseTriple(v[0])
		if !ok {
			return nil, 0, 0, fmt.Errorf("memory/cluster: archival statistics %q", v[0])
		}
		docs += uint64(n)
		sumLen += uint64(l)
	}
	for i, c := range lists {
		term, bound := terms[i%len(terms)], sc[i/len(terms)].MaxSeq
		from := len(ps)
		ordered := true
		for m := range strings.FieldsSeq(c.Val()) {
			seq, tf, dl, ok := parseTriple(m)
			if !ok {
				return nil, 0, 0, fmt.Errorf("memory/cluster: posting %q of term %q", m, term)
			}
			if seq > bound {
				continue
			}
			if n := len(ps); n > from && seq <= ps[n-1].seq {
				ordered = false
			}
			ps = append(ps, posting{term: term, seq: seq, tf: uint32(tf), docLen: uint32(dl)})
		}
		if !ordered {
			// Only a rebuild of the index (buildIndex) leaves copies.
			list := ps[from:]
			slices.SortFunc(list, func(a, b posting) int { return cmp.Compare(a.seq, b.seq) })
			ps = append(ps[:from], slices.CompactFunc(list, func(a, b posting) bool { return a.seq == b.seq })...)
		}
	}
	return ps, docs, sumLen, nil
}

// parseTriple splits "a:b:c" of three decimal integers (dl and posting
// members).
func parseTriple(m string) (a, b, c int64, ok bool) {
	i := strings.IndexByte(m, ':')
	j := strings.LastIndexByte(m, ':')
	if i < 0 || j <= i {
		return 0, 0, 0, false
	}
	var err1, err2, err3 error
	a, err1 = strconv.ParseInt(m[:i], 10, 64)
	b, err2 = strconv.ParseInt(m[i+1:j], 10, 64)
	c, err3 = strconv.ParseInt(m[j+1:], 10, 64)
	return a, b, c, err1 == nil && err2 == nil && err3 == nil && b >= 0 && c >= 0
}

type candidate struct {
	seq  int64
	bm25 float64
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

// items reads candidates' texts and the number and latest time of their
// repeats visible in the scope, in one round trip (items.lua); a candidate
// Redis does not know comes back with seq 0.
func (s *Store) items(ctx context.Context, sc []scopeEntry, cands []candidate) ([]memory.ArchivalItem, error) {
	req := struct {
		Scope [][2]any `json:"scope"`
		Seqs  []string `json:"seqs"`
	}{Scope: make([][2]any, len(sc)), Seqs: make([]string, len(cands))}
	for i, e := range sc {
		req.Scope[i] = [2]any{e.Branch, e.MaxSeq}
	}
	for i, c := range cands {
		req.Seqs[i] = strconv.FormatInt(c.seq, 10)
	}
	arg, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	vals, err := itemsScript.Run(ctx, s.rdb, nil, s.prefix, arg).Slice()
	if err != nil {
		return nil, unavailable("read archival items", err)
	}
	if len(vals) != 3*len(cands) {
		return nil, fmt.Errorf("memory/cluster: archival items: %d values for %d candidates", len(vals), len(cands))
	}
	out := make([]memory.ArchivalItem, len(cands))
	for i := range cands {
		str, ok := vals[3*i].(string)
		if !ok {
			continue // false: not in Redis
		}
		var f factItem
		if err := json.Unmarshal([]byte(str), &f); err != nil {
			return nil, fmt.Errorf("memory/cluster: archival item %s: %w", req.Seqs[i], err)
		}
		count, ok1 := vals[3*i+1].(int64)
		last, ok2 := vals[3*i+2].(int64)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("memory/cluster: archival item %s: repeats %v, %v", req.Seqs[i], vals[3*i+1], vals[3*i+2])
		}
		it := f.item()
		it.Count += int(count)
		it.LastSeen = time.UnixMilli(max(it.FirstSeen.UnixMilli(), last)).UTC()
		out[i] = it
	}
	return out, nil
}
