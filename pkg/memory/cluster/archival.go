package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hpcq/hpcq/pkg/memory"
)

func (s *Store) archOp(branch string, p memory.ArchivalWriteParams) op {
	fact := memory.FactHash(p.Text)
	tags := p.Tags
	if tags == nil {
		tags = []string{}
	}
	tj, _ := json.Marshal(tags)
	return op{T: "arch", B: branch, Text: p.Text, Fact: fact, Tags: string(tj), Ctx: p.Context, Ep: memory.EpisodeHash(fact, branch, p.Context),
		Len: len(memory.Tokenize(p.Text))}
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

// candidateFactor: how many BM25 candidates per result are re-ranked with
// recency and frequency (as in the SQLite store).
