package sqlite

import (
	"math"
	"time"

	"github.com/hpcq/hpcq/pkg/memory"
	"sort"
	"strings"
	"sync"
	"unicode"
)

// archIndex is an in-memory inverted index of the archival texts, kept per
// branch and ordered by seq, so that a search reads only what the reader's
// scope can see: for each (branch, max seq) of the scope, a binary search
// bounds the postings. BM25 statistics (document count, average length,
// document frequencies) are those of the visible set. The index is a cache
// of the archival table: rebuilt at Open, updated after each commit.
type archIndex struct {
	mu       sync.RWMutex
	branches map[string]*branchDocs
	docs     map[int64]*indexedDoc
	// hits are the repeats of each document, by target seq.
	hits map[int64][]hitRec
	// facts lists the documents of each fact hash.
	facts map[string][]int64
}

type hitRec struct {
	seq    int64
	branch string
	ts     time.Time
}

type branchDocs struct {
	seqs      []int64 // ascending
	lenPrefix []int   // lenPrefix[i] = total length of the first i docs
	postings  map[string][]posting
}

type posting struct {
	seq int64
	tf  int32
}

type indexedDoc struct {
	length int
	item   memory.ArchivalItem // as stored; Count, LastSeen, BM25, Score unset
}

func newArchIndex() *archIndex {
	return &archIndex{branches: map[string]*branchDocs{}, docs: map[int64]*indexedDoc{}, hits: map[int64][]hitRec{}, facts: map[string][]int64{}}
}

// tokenize splits text the way unicode61 does: lower-cased runs of
// letters and digits.
func tokenize(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// addHit records a committed repeat of target.
func (x *archIndex) addHit(target, seq int64, branch string, ts time.Time) {
	x.mu.Lock()
	x.hits[target] = append(x.hits[target], hitRec{seq: seq, branch: branch, ts: ts})
	x.mu.Unlock()
}

// counts returns, for a document, its repeats visible in the scope: count
// (the first write included) and last seen.
func (x *archIndex) counts(sc []scopeEntry, seq int64, first time.Time) (int, time.Time) {
	n, last := 1, first
	for _, h := range x.hits[seq] {
		for _, e := range sc {
			if h.branch == e.branch && h.seq <= e.maxSeq {
				n++
				if h.ts.After(last) {
					last = h.ts
				}
				break
			}
		}
	}
	return n, last
}

// add indexes a committed document. Concurrent writers may commit out of
// seq order, so it inserts in place.
func (x *archIndex) add(it memory.ArchivalItem) {
	seq, branch := it.Seq, it.Branch
	it.Count, it.LastSeen, it.BM25, it.Score = 0, time.Time{}, 0, 0
	toks := tokenize(it.Text)
	tf := map[string]int32{}
	for _, t := range toks {
		tf[t]++
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.docs[seq]; ok {
		return
	}
	x.docs[seq] = &indexedDoc{length: len(toks), item: it}
	x.facts[it.FactHash] = append(x.facts[it.FactHash], seq)
	bd := x.branches[branch]
	if bd == nil {
		bd = &branchDocs{lenPrefix: []int{0}, postings: map[string][]posting{}}
		x.branches[branch] = bd
	}
	i := sort.Search(len(bd.seqs), func(i int) bool { return bd.seqs[i] > seq })
	bd.seqs = append(bd.seqs, 0)
	copy(bd.seqs[i+1:], bd.seqs[i:])
	bd.seqs[i] = seq
	bd.lenPrefix = append(bd.lenPrefix, 0)
	for j := len(bd.seqs); j > i; j-- {
		bd.lenPrefix[j] = bd.lenPrefix[j-1] + x.docs[bd.seqs[j-1]].length
	}
	for t, n := range tf {
		ps := bd.postings[t]
		k := sort.Search(len(ps), func(k int) bool { return ps[k].seq > seq })
		ps = append(ps, posting{})
		copy(ps[k+1:], ps[k:])
		ps[k] = posting{seq: seq, tf: n}
		bd.postings[t] = ps
	}
}

// findFact returns the nearest visible document of a fact: in the nearest
// branch of the scope, the latest.
func (x *archIndex) findFact(sc []scopeEntry, fact string) (memory.ArchivalItem, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	seqs := x.facts[fact]
	if len(seqs) == 0 {
		return memory.ArchivalItem{}, false
	}
	for _, e := range sc { // nearest first
		var best *indexedDoc
		for _, q := range seqs {
			d := x.docs[q]
			if d.item.Branch == e.branch && q <= e.maxSeq && (best == nil || q > best.item.Seq) {
				best = d
			}
		}
		if best != nil {
			return best.item, true
		}
	}
	return memory.ArchivalItem{}, false
}

// remove drops documents added for a transaction that rolled back.
func (x *archIndex) remove(seqs []int64) {
	if len(seqs) == 0 {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, seq := range seqs {
		d, ok := x.docs[seq]
		if !ok {
			continue
		}
		delete(x.docs, seq)
		fs := x.facts[d.item.FactHash]
		for i, q := range fs {
			if q == seq {
				x.facts[d.item.FactHash] = append(fs[:i], fs[i+1:]...)
				break
			}
		}
		bd := x.branches[d.item.Branch]
		i := sort.Search(len(bd.seqs), func(i int) bool { return bd.seqs[i] >= seq })
		if i < len(bd.seqs) && bd.seqs[i] == seq {
			bd.seqs = append(bd.seqs[:i], bd.seqs[i+1:]...)
			bd.lenPrefix = append(bd.lenPrefix[:i+1], bd.lenPrefix[i+2:]...)
			for j := i + 1; j < len(bd.lenPrefix); j++ {
				bd.lenPrefix[j] = bd.lenPrefix[j-1] + x.docs[bd.seqs[j-1]].length
			}
		}
		for t, ps := range bd.postings {
			for k, po := range ps {
				if po.seq == seq {
					bd.postings[t] = append(ps[:k], ps[k+1:]...)
					break
				}
			}
		}
	}
}

// BM25 parameters (the values SQLite's bm25() uses).
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

type scored struct {
	seq  int64
	bm25 float64
	item memory.ArchivalItem
}

// search scores the scope's visible documents that contain any query
// term, keeping those that carry every tag, and returns the best n.
func (x *archIndex) search(sc []scopeEntry, query string, tags []string, n int) []scored {
	terms := uniq(tokenize(query))
	if len(terms) == 0 {
		return nil
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	type part struct {
		bd  *branchDocs
		max int64
	}
	parts := make([]part, 0, len(sc))
	total, sumLen := 0, 0
	for _, e := range sc {
		bd := x.branches[e.branch]
		if bd == nil {
			continue
		}
		k := sort.Search(len(bd.seqs), func(i int) bool { return bd.seqs[i] > e.maxSeq })
		total += k
		sumLen += bd.lenPrefix[k]
		parts = append(parts, part{bd, e.maxSeq})
	}
	if total == 0 {
		return nil
	}
	avgdl := float64(sumLen) / float64(total)
	scores := map[int64]float64{}
	for _, t := range terms {
		df := 0
		for _, p := range parts {
			ps := p.bd.postings[t]
			df += sort.Search(len(ps), func(i int) bool { return ps[i].seq > p.max })
		}
		if df == 0 {
			continue
		}
		idf := math.Log(1 + (float64(total)-float64(df)+0.5)/(float64(df)+0.5))
		for _, p := range parts {
			for _, po := range p.bd.postings[t] {
				if po.seq > p.max {
					break
				}
				d := x.docs[po.seq]
				tf := float64(po.tf)
				scores[po.seq] += idf * tf * (bm25K1 + 1) / (tf + bm25K1*(1-bm25B+bm25B*float64(d.length)/avgdl))
			}
		}
	}
	out := make([]scored, 0, len(scores))
	for seq, s := range scores {
		if len(tags) > 0 && !hasAll(x.docs[seq].item.Tags, tags) {
			continue
		}
		out = append(out, scored{seq: seq, bm25: s, item: x.docs[seq].item})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].bm25 != out[j].bm25 {
			return out[i].bm25 > out[j].bm25
		}
		return out[i].seq > out[j].seq
	})
	if len(out) > n {
		out = out[:n]
	}
	for i := range out {
		out[i].item.Count, out[i].item.LastSeen = x.counts(sc, out[i].seq, out[i].item.FirstSeen)
	}
	return out
}

func uniq(xs []string) []string {
	seen := map[string]bool{}
	out := xs[:0]
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

func hasAll(have, want []string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			if h == w {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
