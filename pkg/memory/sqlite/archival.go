package sqlite

import (
	"context"
	"sort"
	"strings"

	"github.com/hpcq/hpcq/internal/jsonw"
	"github.com/hpcq/hpcq/pkg/memory"
)

func (s *Store) ArchivalWrite(ctx context.Context, p memory.ArchivalWriteParams) (memory.ArchivalItem, bool, error) {
	if strings.TrimSpace(p.Text) == "" {
		return memory.ArchivalItem{}, false, invalid("ArchivalWrite: empty text")
	}
	sc, err := s.scope(ctx, p.Branch)
	if err != nil {
		return memory.ArchivalItem{}, false, err
	}
	var item memory.ArchivalItem
	dup := false
	var hitSeq int64
	err = s.tx(ctx, func(seq int64) error {
		hitSeq = seq
		item, dup = s.archivalInsert(seq, sc, p)
		return nil
	}, func() { s.indexWrite(item, dup, hitSeq, p.Branch) })
	if err != nil {
		return item, dup, err
	}
	if dup {
		item.Count, item.LastSeen = s.arch.countsOf(sc, item.Seq, item.FirstSeen)
	}
	return item, dup, nil
}

// indexWrite brings the archival index up to a committed write: a new
// document, or a repeat (hit seq on branch) of item.
func (s *Store) indexWrite(item memory.ArchivalItem, dup bool, seq int64, branch string) {
	if dup {
		s.arch.addHit(item.Seq, seq, branch, fromMS(ms(s.now())))
		return
	}
	s.arch.addItem(item)
}

// archivalInsert stores the text, or a repeat of the visible fact.
func (s *Store) archivalInsert(seq int64, sc []scopeEntry, p memory.ArchivalWriteParams) (memory.ArchivalItem, bool) {
	fact := memory.FactHash(p.Text)
	now := s.now()
	// Writes are serialized and the index is current with every commit,
	// so the visible copy of the fact, if any, is in the index.
	if prev, ok := s.arch.findFact(sc, fact); ok {
		s.row("hit", seq, p.Branch, prev.Seq, ms(now))
		return prev, true
	}
	tags := p.Tags
	if tags == nil {
		tags = []string{}
	}
	item := memory.ArchivalItem{Seq: seq, Branch: p.Branch, Text: p.Text, Tags: tags, Context: p.Context, FactHash: fact,
		EpisodeHash: memory.EpisodeHash(fact, p.Branch, p.Context), Count: 1, FirstSeen: fromMS(ms(now)), LastSeen: fromMS(ms(now))}
	s.row("archival", seq, p.Branch, p.Text, string(jsonw.AppendStrings(nil, tags)), p.Context, fact, item.EpisodeHash, memory.CountTerms(p.Text), ms(now))
	return item, false
}

// candidateFactor: how many BM25 candidates per result are re-ranked with
// recency and frequency.
const candidateFactor = 4

func (s *Store) ArchivalSearch(ctx context.Context, p memory.ArchivalSearchParams) ([]memory.ArchivalItem, error) {
	sc, err := s.scope(ctx, p.Branch)
	if err != nil {
		return nil, err
	}
	k := p.K
	if k <= 0 {
		k = 8
	}
	cands := s.arch.searchItems(sc, p.Query, p.Tags, k*candidateFactor)
	now := s.now()
	items := make([]memory.ArchivalItem, len(cands))
	for i, c := range cands {
		it := c.item
		it.BM25 = c.bm25
		it.Score = memory.Rank(it.BM25, it.LastSeen, it.Count, now, s.halfLife)
		items[i] = it
	}
	sort.SliceStable(items, func(i, j int) bool { return items[i].Score > items[j].Score })
	if len(items) > k {
		items = items[:k]
	}
	return items, nil
}
