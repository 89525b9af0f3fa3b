package sqlite

import (
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/hpcq/hpcq/pkg/memory"
)

// textIndex is an in-memory inverted index of texts, kept per branch and
// ordered by seq, so that a search reads only what the reader's scope can
// see: for each (branch, max seq) of the scope, a binary search bounds the
// postings. BM25 statistics (document count, average length, document
// frequencies) are those of the visible set. It is a cache of a table:
// rebuilt at Open, updated under the write lock with each commit. T is the
// stored row returned by searches.
type textIndex[T any] struct {
	mu       sync.RWMutex
	branches map[string]*branchDocs
	docs     map[int64]*indexedDoc[T]
	// textOf, when set, makes the index lazy: a document added is placed
	// at once (listed in order by its branch) and its terms are indexed at
	// the first search whose scope sees its branch (indexScope). For the
	// recall events: every prompt lists them, a search of them comes only
	// when a model asks for one, and indexing each event as it was written
	// was 4% of a run's CPU and a large part of its live heap.
	textOf func(T) string
	// ids numbers the index's terms: a branch's postings name a term by
	// its number. The postings hold no pointer then, which the collector
	// would follow at every cycle (they were the largest part of a
	// 10,000-node run's live heap), and no piece of a document's
	// lower-cased text stays alive for the term it first brought.
	ids map[string]termID
	// scratch is post's list of a document's term numbers, kept for the
	// next document.
	scratch []termID
}

// termID is a term's number in its index.
type termID uint32

// branchDocs is one branch's documents. A branch (a node) has a few dozen
// documents and a few hundred terms, so its postings are two parallel
// slices sorted by term then seq: no map and no slice per term, whose
// allocations cost more than the rest of indexing a document. Past
// flatMax postings a branch moves them into a map of terms.
type branchDocs struct {
	seqs      []int64 // ascending
	lenPrefix []int   // lenPrefix[i] = total length of the first i docs
	// terms[i] is the term of posts[i] (flat layout).
	terms []termID
	posts []posting
	// postings replaces terms and posts once the branch is large.
	postings map[termID][]posting
	// pending: the documents of a lazy index not indexed yet, in the order
	// added. While there are any, lenPrefix is not kept (indexScope
	// counts it again).
	pending []int64
}

// flatMax: the postings a branch keeps in its sorted slices (inserting is
// a copy of them); past it, a map.
const flatMax = 4096

type posting struct {
	seq int64
	tf  int32
}

// postingsOf returns term t's postings on the branch, in seq order.
func (bd *branchDocs) postingsOf(t termID) []posting {
	if bd.postings != nil {
		return bd.postings[t]
	}
	lo, ok := slices.BinarySearch(bd.terms, t)
	if !ok {
		return nil
	}
	hi := bd.runEnd(lo)
	return bd.posts[lo:hi:hi]
}

// runEnd returns the end of the run of postings of bd.terms[lo]'s term
// (flat layout).
func (bd *branchDocs) runEnd(lo int) int {
	hi := lo + 1
	for hi < len(bd.terms) && bd.terms[hi] == bd.terms[lo] {
		hi++
	}
	return hi
}

// insert adds document seq's postings: its terms, distinct and sorted by
// number, with their counts.
func (bd *branchDocs) insert(seq int64, terms []termCount) {
	if bd.postings != nil {
		for _, t := range terms {
			ps := bd.postings[t.id]
			k := sort.Search(len(ps), func(k int) bool { return ps[k].seq > seq })
			bd.postings[t.id] = slices.Insert(ps, k, posting{seq: seq, tf: t.tf})
		}
		return
	}
	// Merged from the back into the grown slices: (term, seq) order, the
	// new document's postings usually last within their terms.
	n := len(bd.terms)
	bd.terms = slices.Grow(bd.terms, len(terms))[:n+len(terms)]
	bd.posts = slices.Grow(bd.posts, len(terms))[:n+len(terms)]
	i, k := n-1, len(terms)-1
	for w := n + len(terms) - 1; k >= 0; w-- {
		if i >= 0 && (bd.terms[i] > terms[k].id || bd.terms[i] == terms[k].id && bd.posts[i].seq > seq) {
			bd.terms[w], bd.posts[w] = bd.terms[i], bd.posts[i]
			i--
		} else {
			bd.terms[w], bd.posts[w] = terms[k].id, posting{seq: seq, tf: terms[k].tf}
			k--
		}
	}
	if len(bd.posts) > flatMax {
		bd.postings = map[termID][]posting{}
		for i := 0; i < len(bd.terms); {
			j := bd.runEnd(i)
			bd.postings[bd.terms[i]] = slices.Clone(bd.posts[i:j])
			i = j
		}
		bd.terms, bd.posts = nil, nil
	}
}

// drop removes the postings of seq.
func (bd *branchDocs) drop(seq int64) {
	if bd.postings != nil {
		for t, ps := range bd.postings {
			if k := slices.IndexFunc(ps, func(p posting) bool { return p.seq == seq }); k >= 0 {
				bd.postings[t] = slices.Delete(ps, k, k+1)
			}
		}
		return
	}
	w := 0
	for i := range bd.posts {
		if bd.posts[i].seq != seq {
			bd.terms[w], bd.posts[w] = bd.terms[i], bd.posts[i]
			w++
		}
	}
	bd.terms, bd.posts = bd.terms[:w], bd.posts[:w]
}

type indexedDoc[T any] struct {
	branch string
	length int
	tags   []string
	item   T
}

func newTextIndex[T any]() *textIndex[T] {
	return &textIndex[T]{branches: map[string]*branchDocs{}, docs: map[int64]*indexedDoc[T]{}, ids: map[string]termID{}}
}

// newLazyIndex is an index that indexes a document's terms, textOf(item),
// at the first search that can see it.
func newLazyIndex[T any](textOf func(T) string) *textIndex[T] {
	x := newTextIndex[T]()
	x.textOf = textOf
	return x
}

// add indexes a document; the caller holds x.mu. Concurrent writers may
// commit out of seq order, so it inserts in place. A lazy index takes no
// text: it asks textOf when it indexes the document.
func (x *textIndex[T]) add(seq int64, branch, text string, tags []string, item T) {
	if _, ok := x.docs[seq]; ok {
		return
	}
	d := &indexedDoc[T]{branch: branch, tags: tags, item: item}
	x.docs[seq] = d
	bd := x.branches[branch]
	if bd == nil {
		bd = &branchDocs{lenPrefix: []int{0}}
		x.branches[branch] = bd
	}
	i := sort.Search(len(bd.seqs), func(i int) bool { return bd.seqs[i] > seq })
	bd.seqs = slices.Insert(bd.seqs, i, seq)
	if x.textOf != nil {
		bd.pending = append(bd.pending, seq)
		return
	}
	d.length = x.post(bd, seq, text)
	// The prefixes past i each gain this document: shifted by one, plus its
	// length.
	bd.lenPrefix = append(bd.lenPrefix, 0)
	for j := len(bd.seqs); j > i; j-- {
		bd.lenPrefix[j] = bd.lenPrefix[j-1] + d.length
	}
}

// post inserts document seq's postings on its branch and returns its
// length in terms. The caller holds x.mu.
func (x *textIndex[T]) post(bd *branchDocs, seq int64, text string) (length int) {
	// Each term by its number (numbered as first seen), then each distinct
	// number once with its count: numbers sort several times faster than
	// the terms did.
	ids := x.scratch[:0]
	for t := range memory.Terms(text) {
		id, ok := x.ids[t]
		if !ok {
			id = termID(len(x.ids))
			x.ids[strings.Clone(t)] = id
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	distinct := 0
	for i := range ids {
		if i == 0 || ids[i] != ids[i-1] {
			distinct++
		}
	}
	counted := make([]termCount, 0, distinct)
	for i := 0; i < len(ids); {
		j := i + 1
		for j < len(ids) && ids[j] == ids[i] {
			j++
		}
		counted = append(counted, termCount{ids[i], int32(j - i)})
		i = j
	}
	bd.insert(seq, counted)
	if cap(ids) <= maxScratch {
		x.scratch = ids
	}
	return len(ids)
}

// maxScratch bounds the term numbers an index keeps for the next document:
// a larger list, made for an exceptional text, is left to the collector.
const maxScratch = 1 << 16

// scopeIndexed says whether every document the scope's branches hold is
// indexed; the caller holds x.mu, for reading at least.
func (x *textIndex[T]) scopeIndexed(sc []scopeEntry) bool {
	for _, e := range sc {
		if bd := x.branches[e.Branch]; bd != nil && len(bd.pending) > 0 {
			return false
		}
	}
	return true
}

// indexScope indexes the pending documents of the scope's branches and
// counts their length prefixes again; the caller holds x.mu for writing.
func (x *textIndex[T]) indexScope(sc []scopeEntry) {
	for _, e := range sc {
		bd := x.branches[e.Branch]
		if bd == nil || len(bd.pending) == 0 {
			continue
		}
		for _, seq := range bd.pending {
			d := x.docs[seq]
			d.length = x.post(bd, seq, x.textOf(d.item))
		}
		bd.pending = nil
		x.recount(bd)
	}
}

// recount counts a branch's length prefixes again; the caller holds x.mu
// for writing.
func (x *textIndex[T]) recount(bd *branchDocs) {
	bd.lenPrefix = slices.Grow(bd.lenPrefix[:0], len(bd.seqs)+1)[:len(bd.seqs)+1]
	bd.lenPrefix[0] = 0
	for i, seq := range bd.seqs {
		bd.lenPrefix[i+1] = bd.lenPrefix[i] + x.docs[seq].length
	}
}

// termCount is a term of a document and its count there.
type termCount struct {
	id termID
	tf int32
}

// remove drops documents; the caller holds x.mu.
func (x *textIndex[T]) remove(seq int64) {
	d, ok := x.docs[seq]
	if !ok {
		return
	}
	delete(x.docs, seq)
	bd := x.branches[d.branch]
	if k := slices.Index(bd.pending, seq); k >= 0 {
		bd.pending = slices.Delete(bd.pending, k, k+1)
	}
	i := sort.Search(len(bd.seqs), func(i int) bool { return bd.seqs[i] >= seq })
	if i < len(bd.seqs) && bd.seqs[i] == seq {
		bd.seqs = append(bd.seqs[:i], bd.seqs[i+1:]...)
		switch {
		case len(bd.pending) > 0: // counted again when indexed
		case x.textOf != nil:
			// The prefixes were not kept while documents were pending,
			// and some may have been removed meanwhile.
			x.recount(bd)
		default:
			bd.lenPrefix = bd.lenPrefix[:len(bd.seqs)+1]
			for j := i + 1; j < len(bd.lenPrefix); j++ {
				bd.lenPrefix[j] = bd.lenPrefix[j-1] + x.docs[bd.seqs[j-1]].length
			}
		}
	}
	bd.drop(seq)
}

type scored[T any] struct {
	seq  int64
	bm25 float64
	item T
}

// search scores the scope's visible documents that contain any query
// term, keeping those that carry every tag, and returns the best n, best
// first (ties: newest first). The caller holds x.mu for reading, and the
// scope's documents are indexed (scopeIndexed).
func (x *textIndex[T]) search(sc []scopeEntry, query string, tags []string, n int) []scored[T] {
	var terms []termID
	for _, t := range memory.QueryTerms(query) {
		if id, ok := x.ids[t]; ok {
			terms = append(terms, id)
		}
	}
	if len(terms) == 0 {
		return nil
	}
	type part struct {
		bd  *branchDocs
		max int64
	}
	parts := make([]part, 0, len(sc))
	total, sumLen := 0, 0
	for _, e := range sc {
		bd := x.branches[e.Branch]
		if bd == nil {
			continue
		}
		k := sort.Search(len(bd.seqs), func(i int) bool { return bd.seqs[i] > e.MaxSeq })
		total += k
		sumLen += bd.lenPrefix[k]
		parts = append(parts, part{bd, e.MaxSeq})
	}
	if total == 0 {
		return nil
	}
	avgdl := float64(sumLen) / float64(total)
	scores := map[int64]float64{}
	for _, t := range terms {
		df := 0
		for _, p := range parts {
			ps := p.bd.postingsOf(t)
			df += sort.Search(len(ps), func(i int) bool { return ps[i].seq > p.max })
		}
		if df == 0 {
			continue
		}
		idf := memory.BM25IDF(total, df)
		for _, p := range parts {
			for _, po := range p.bd.postingsOf(t) {
				if po.seq > p.max {
					break
				}
				d := x.docs[po.seq]
				scores[po.seq] += memory.BM25Term(idf, int(po.tf), d.length, avgdl)
			}
		}
	}
	out := make([]scored[T], 0, len(scores))
	for seq, s := range scores {
		d := x.docs[seq]
		if len(tags) > 0 && !memory.HasTags(d.tags, tags) {
			continue
		}
		out = append(out, scored[T]{seq: seq, bm25: s, item: d.item})
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
	return out
}

// recallIndex is the recall event index.
type recallIndex struct {
	*textIndex[memory.RecallEvent]
}

func newRecallIndex() recallIndex {
	return recallIndex{newLazyIndex(func(ev memory.RecallEvent) string { return ev.Kind + " " + ev.Payload })}
}

func (x recallIndex) addEvent(ev memory.RecallEvent) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.add(ev.Seq, ev.Branch, "", nil, ev)
}

// searchEvents ranks the scope's events for query, indexing first those
// of its branches not indexed yet.
func (x recallIndex) searchEvents(sc []scopeEntry, query string, n int) []memory.RecallEvent {
	x.mu.RLock()
	if !x.scopeIndexed(sc) {
		// Indexed and searched under the write lock: an event committed
		// between the two locks would be seen and not indexed.
		x.mu.RUnlock()
		x.mu.Lock()
		defer x.mu.Unlock()
		x.indexScope(sc)
	} else {
		defer x.mu.RUnlock()
	}
	hits := x.search(sc, query, nil, n)
	out := make([]memory.RecallEvent, len(hits))
	for i, h := range hits {
		out[i] = h.item
	}
	return out
}
