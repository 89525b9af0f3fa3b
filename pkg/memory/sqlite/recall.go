package sqlite

import (
	"context"
	"database/sql"

	"github.com/hpcq/hpcq/pkg/memory"
)

func (s *Store) RecallAppend(ctx context.Context, p memory.RecallAppendParams) (memory.RecallEvent, error) {
	ev := p.Event
	if ev.Kind == "" {
		return ev, invalid("RecallAppend: empty kind")
	}
	if _, err := s.scope(ctx, p.Branch); err != nil {
		return ev, err
	}
	ev.Branch = p.Branch
	if ev.TS.IsZero() {
		ev.TS = s.now()
	}
	ev.TS = fromMS(ms(ev.TS))
	err := s.tx(ctx, func(seq int64) error {
		ev.Seq = seq
		s.row("recall", ev.Seq, ev.Branch, ms(ev.TS), ev.Kind, ev.NodeID, ev.Phase, ev.Payload)
		return nil
	}, func() { s.recall.addEvent(ev) })
	return ev, err
}

func scanEvents(rows *sql.Rows) ([]memory.RecallEvent, error) {
	defer rows.Close()
	var out []memory.RecallEvent
	for rows.Next() {
		var e memory.RecallEvent
		var ts int64
		if err := rows.Scan(&e.Seq, &e.Branch, &ts, &e.Kind, &e.NodeID, &e.Phase, &e.Payload); err != nil {
			return nil, err
		}
		e.TS = fromMS(ts)
		out = append(out, e)
	}
	return out, rows.Err()
}

func (s *Store) RecallList(ctx context.Context, p memory.RecallListParams) ([]memory.RecallEvent, int, error) {
	sc, err := s.scope(ctx, p.Branch)
	if err != nil {
		return nil, 0, err
	}
	evs, total := s.recall.list(sc, p.AfterSeq, p.Limit, p.Newest, p.Total)
	return evs, total, nil
}

func (s *Store) RecallSearch(ctx context.Context, p memory.RecallSearchParams) ([]memory.RecallEvent, error) {
	sc, err := s.scope(ctx, p.Branch)
	if err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 20
	}
	return s.recall.searchEvents(sc, p.Query, limit), nil
}

func (s *Store) RecallSummaryGet(ctx context.Context, branch string) (memory.RecallSummary, error) {
	sc, err := s.scope(ctx, branch)
	if err != nil {
		return memory.RecallSummary{}, err
	}
	return s.summaries.get(sc), nil
}

func (s *Store) RecallUnfolded(ctx context.Context, branch string, limit int) (memory.RecallSummary, int, error) {
	sc, err := s.scope(ctx, branch)
	if err != nil {
		return memory.RecallSummary{}, 0, err
	}
	sum := s.summaries.get(sc)
	_, n := s.recall.list(sc, sum.FoldedSeq, 1, false, true)
	return sum, min(n, max(limit, 0)), nil
}

func (s *Store) RecallSummarySet(ctx context.Context, p memory.RecallSummarySetParams) error {
	if _, err := s.scope(ctx, p.Branch); err != nil {
		return err
	}
	var v summaryVersion
	return s.tx(ctx, func(seq int64) error {
		v.seq, v.sum = seq, p.Summary
		s.row("summary", v.seq, p.Branch, p.Summary.Text, p.Summary.FoldedSeq, ms(s.now()))
		return nil
	}, func() { s.summaries.add(p.Branch, v) })
}
