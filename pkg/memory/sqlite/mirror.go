package sqlite

import (
	"sort"
	"sync"
	"time"

	"github.com/hpcq/hpcq/pkg/memory"
)

// coreMirror holds every core version by branch and key, ascending seq,
// so that reads never touch SQLite: the nearest visible write of a key is
// found branch by branch along the scope.
type coreMirror struct {
	mu       sync.RWMutex
	byBranch map[string]map[string][]coreVersion
}

type coreVersion struct {
	entry   memory.CoreEntry
	deleted bool
}

func newCoreMirror() *coreMirror { return &coreMirror{byBranch: map[string]map[string][]coreVersion{}} }

func (c *coreMirror) add(v coreVersion) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := c.byBranch[v.entry.Branch]
	if keys == nil {
		keys = map[string][]coreVersion{}
		c.byBranch[v.entry.Branch] = keys
	}
	vs := keys[v.entry.Key]
	i := sort.Search(len(vs), func(i int) bool { return vs[i].entry.Seq > v.entry.Seq })
	vs = append(vs, coreVersion{})
	copy(vs[i+1:], vs[i:])
	vs[i] = v
	keys[v.entry.Key] = vs
}

// latest is the last version with seq <= max, if any.
func latest(vs []coreVersion, max int64) (coreVersion, bool) {
	i := sort.Search(len(vs), func(i int) bool { return vs[i].entry.Seq > max })
	if i == 0 {
		return coreVersion{}, false
	}
	return vs[i-1], true
}

func live(v coreVersion, now time.Time) bool {
	return !v.deleted && (v.entry.Expires.IsZero() || v.entry.Expires.After(now))
}

// get returns the nearest visible live write of key.
func (c *coreMirror) get(sc []scopeEntry, key string, now time.Time) (memory.CoreEntry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, e := range sc {
		if v, ok := latest(c.byBranch[e.Branch][key], e.MaxSeq); ok {
			// A tombstone or an expired write hides older values.
			return v.entry, live(v, now)
		}
	}
	return memory.CoreEntry{}, false
}

// list returns every visible live key, by key.
func (c *coreMirror) list(sc []scopeEntry, now time.Time) []memory.CoreEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	decided := map[string]bool{}
	var out []memory.CoreEntry
	for _, e := range sc {
		for key, vs := range c.byBranch[e.Branch] {
			if decided[key] {
				continue
			}
			if v, ok := latest(vs, e.MaxSeq); ok {
				decided[key] = true
				if live(v, now) {
					out = append(out, v.entry)
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// summaryMirror holds the versions of each branch's recall summary.
type summaryMirror struct {
	mu       sync.RWMutex
	byBranch map[string][]summaryVersion // ascending seq
}

type summaryVersion struct {
	seq int64
	sum memory.RecallSummary
}

func newSummaryMirror() *summaryMirror {
	return &summaryMirror{byBranch: map[string][]summaryVersion{}}
}

func (m *summaryMirror) add(branch string, v summaryVersion) {
	m.mu.Lock()
	defer m.mu.Unlock()
	vs := m.byBranch[branch]
	i := sort.Search(len(vs), func(i int) bool { return vs[i].seq > v.seq })
	vs = append(vs, summaryVersion{})
	copy(vs[i+1:], vs[i:])
	vs[i] = v
	m.byBranch[branch] = vs
}

// get returns the nearest visible summary.
func (m *summaryMirror) get(sc []scopeEntry) memory.RecallSummary {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, e := range sc {
		vs := m.byBranch[e.Branch]
		i := sort.Search(len(vs), func(i int) bool { return vs[i].seq > e.MaxSeq })
		if i > 0 {
			return vs[i-1].sum
		}
	}
	return memory.RecallSummary{}
}

// list returns the scope's events with seq > after, in seq order: all, or
// the first or last limit of them; and, with total, how many there are.
func (x recallIndex) list(sc []scopeEntry, after int64, limit int, newest, total bool) ([]memory.RecallEvent, int) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var seqs []int64
	count := 0
	for _, e := range sc {
		bd := x.branches[e.Branch]
		if bd == nil {
			continue
		}
		lo := sort.Search(len(bd.seqs), func(i int) bool { return bd.seqs[i] > after })
		hi := sort.Search(len(bd.seqs), func(i int) bool { return bd.seqs[i] > e.MaxSeq })
		if hi <= lo {
			continue
		}
		count += hi - lo
		part := bd.seqs[lo:hi]
		if limit > 0 && len(part) > limit { // no more than limit can come from one branch
			if newest {
				part = part[len(part)-limit:]
			} else {
				part = part[:limit]
			}
		}
		seqs = append(seqs, part...)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	if limit > 0 && len(seqs) > limit {
		if newest {
			seqs = seqs[len(seqs)-limit:]
		} else {
			seqs = seqs[:limit]
		}
	}
	out := make([]memory.RecallEvent, len(seqs))
	for i, q := range seqs {
		out[i] = x.docs[q].item
	}
	if !total {
		count = 0
	}
	return out, count
}
