// The archival texts' index: each fact's items and the hits that repeat
// it, counted per branch as seen from a scope.

package sqlite

import (
	"slices"
	"sort"
	"time"

	"github.com/hpcq/hpcq/pkg/memory"
)

// archIndex is the archival text index plus what dedup and ranking need:
// the documents of each fact hash and the repeats of each document.
type archIndex struct {
	*textIndex[memory.ArchivalItem]
	// facts: the documents of each fact on each branch, in seq order. By
	// branch, so that finding the visible copy of a fact looks at the
	// scope's branches only: a fact every node writes (a node's result
	// line) has a document on every branch, and a look through all of
	// them made each write cost more the larger the run (findFact was 2%
	// of a 10,000-node run's CPU, twice its share at 3,000).
	facts map[factKey][]int64
	// hits: the repeats of each document, by branch: a document's count in
	// a scope is found without going through every repeat of it (a fact
	// every node writes again is repeated once per node).
	hits map[int64]map[string]*hitList
}

type factKey struct{ fact, branch string }

// hitList is the repeats of one document on one branch, in seq order.
type hitList struct {
	seqs []int64
	ts   []time.Time
	// last[i] is the latest of ts[:i+1].
	last []time.Time
}

// add records a repeat (once per seq).
func (l *hitList) add(seq int64, ts time.Time) {
	i, found := slices.BinarySearch(l.seqs, seq)
	if found {
		return
	}
	l.seqs = slices.Insert(l.seqs, i, seq)
	l.ts = slices.Insert(l.ts, i, ts)
	l.last = slices.Insert(l.last, i, ts)
	for j := i; j < len(l.last); j++ { // past the end only when repeats come out of order
		l.last[j] = l.ts[j]
		if j > 0 && l.last[j-1].After(l.last[j]) {
			l.last[j] = l.last[j-1]
		}
	}
}

// upTo returns how many repeats have a seq of at most maxSeq, and the
// latest time among them.
func (l *hitList) upTo(maxSeq int64) (int, time.Time) {
	k := sort.Search(len(l.seqs), func(i int) bool { return l.seqs[i] > maxSeq })
	if k == 0 {
		return 0, time.Time{}
	}
	return k, l.last[k-1]
}

func newArchIndex() *archIndex {
	return &archIndex{textIndex: newTextIndex[memory.ArchivalItem](), facts: map[factKey][]int64{}, hits: map[int64]map[string]*hitList{}}
}

// addItem indexes a committed archival text.
func (x *archIndex) addItem(it memory.ArchivalItem) {
	it.Count, it.LastSeen, it.BM25, it.Score = 0, time.Time{}, 0, 0
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.docs[it.Seq]; ok {
		return
	}
	x.add(it.Seq, it.Branch, it.Text, it.Tags, it)
	k := factKey{it.FactHash, it.Branch}
	seqs := x.facts[k]
	i, _ := slices.BinarySearch(seqs, it.Seq)
	x.facts[k] = slices.Insert(seqs, i, it.Seq)
}

// addHit records a committed repeat of target.
func (x *archIndex) addHit(target, seq int64, branch string, ts time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	byBranch := x.hits[target]
	if byBranch == nil {
		byBranch = map[string]*hitList{}
		x.hits[target] = byBranch
	}
	l := byBranch[branch]
	if l == nil {
		l = &hitList{}
		byBranch[branch] = l
	}
	l.add(seq, ts)
}

// removeItems drops texts added for a transaction that rolled back.
func (x *archIndex) removeItems(seqs []int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, seq := range seqs {
		d, ok := x.docs[seq]
		if !ok {
			continue
		}
		k := factKey{d.item.FactHash, d.branch}
		if i, ok := slices.BinarySearch(x.facts[k], seq); ok {
			x.facts[k] = slices.Delete(x.facts[k], i, i+1)
			if len(x.facts[k]) == 0 {
				delete(x.facts, k)
			}
		}
		x.remove(seq)
	}
}

// counts returns a document's repeats visible in the scope: the count
// (the first write included) and last seen. The caller holds x.mu.
func (x *archIndex) counts(sc []scopeEntry, seq int64, first time.Time) (int, time.Time) {
	n, last := 1, first
	byBranch := x.hits[seq]
	if len(byBranch) == 0 {
		return n, last
	}
	for i, e := range sc {
		l := byBranch[e.Branch]
		if l == nil || slices.ContainsFunc(sc[:i], func(o scopeEntry) bool { return o.Branch == e.Branch }) {
			continue
		}
		// A repeat is visible under any entry of its branch.
		bound := e.MaxSeq
		for _, o := range sc[i+1:] {
			if o.Branch == e.Branch {
				bound = max(bound, o.MaxSeq)
			}
		}
		k, ts := l.upTo(bound)
		n += k
		if k > 0 && ts.After(last) {
			last = ts
		}
	}
	return n, last
}

// countsOf is counts taking the lock.
func (x *archIndex) countsOf(sc []scopeEntry, seq int64, first time.Time) (int, time.Time) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.counts(sc, seq, first)
}

// findFact returns the nearest visible document of a fact: in the nearest
// branch of the scope, the latest.
func (x *archIndex) findFact(sc []scopeEntry, fact string) (memory.ArchivalItem, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	for _, e := range sc { // nearest first
		seqs := x.facts[factKey{fact, e.Branch}]
		if k := sort.Search(len(seqs), func(i int) bool { return seqs[i] > e.MaxSeq }); k > 0 {
			return x.docs[seqs[k-1]].item, true
		}
	}
	return memory.ArchivalItem{}, false
}

// searchItems ranks the scope's texts, counts filled in.
func (x *archIndex) searchItems(sc []scopeEntry, query string, tags []string, n int) []scored[memory.ArchivalItem] {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := x.search(sc, query, tags, n)
	for i := range out {
		out[i].item.Count, out[i].item.LastSeen = x.counts(sc, out[i].seq, out[i].item.FirstSeen)
	}
	return out
}
