package sqlite

import (
	"context"
	"strings"

	"github.com/hpcq/hpcq/pkg/memory"
)

func checkCoreSet(p *memory.CoreSetParams) error {
	if p.Key == "" {
		return invalid("CoreSet: empty key")
	}
	if p.Importance == 0 {
		p.Importance = 3
	}
	if p.Importance < 1 || p.Importance > 5 {
		return invalid("CoreSet %s: importance %d, must be 1 to 5", p.Key, p.Importance)
	}
	if p.TTL < 0 {
		return invalid("CoreSet %s: negative TTL", p.Key)
	}
	return nil
}

func (s *Store) CoreSet(ctx context.Context, p memory.CoreSetParams) (memory.CoreEntry, error) {
	if err := checkCoreSet(&p); err != nil {
		return memory.CoreEntry{}, err
	}
	if _, err := s.scope(ctx, p.Branch); err != nil {
		return memory.CoreEntry{}, err
	}
	var e memory.CoreEntry
	err := s.tx(ctx, func(seq int64) error {
		e = s.coreInsert(seq, p)
		return nil
	}, func() { s.core.add(coreVersion{entry: e}) })
	return e, err
}

func (s *Store) coreInsert(seq int64, p memory.CoreSetParams) memory.CoreEntry {
	now := s.now()
	e := memory.CoreEntry{Key: p.Key, Value: p.Value, Importance: p.Importance, Branch: p.Branch, Updated: fromMS(ms(now)), Seq: seq}
	var expires int64
	if p.TTL > 0 {
		e.Expires = fromMS(ms(now.Add(p.TTL)))
		expires = ms(e.Expires)
	}
	s.row("core", seq, p.Branch, p.Key, p.Value, p.Importance, expires, 0, ms(now))
	return e
}

// Apply writes a batch in one transaction: all of it or none.
func (s *Store) Apply(ctx context.Context, p memory.ApplyParams) error {
	for i := range p.CoreSets {
		p.CoreSets[i].Branch = p.Branch
		if err := checkCoreSet(&p.CoreSets[i]); err != nil {
			return err
		}
	}
	for _, k := range p.CoreDeletes {
		if k == "" {
			return invalid("CoreDelete: empty key")
		}
	}
	for _, a := range p.Archival {
		if strings.TrimSpace(a.Text) == "" {
			return invalid("ArchivalWrite: empty text")
		}
	}
	sc, err := s.scope(ctx, p.Branch)
	if err != nil {
		return err
	}
	type written struct {
		item memory.ArchivalItem
		dup  bool
		seq  int64
	}
	var added []written
	var pending []int64
	var cores []coreVersion
	err = s.txMulti(ctx, func(next func() int64) error {
		for _, c := range p.CoreSets {
			cores = append(cores, coreVersion{entry: s.coreInsert(next(), c)})
		}
		for _, k := range p.CoreDeletes {
			cores = append(cores, s.coreDelete(next(), p.Branch, k))
		}
		for _, a := range p.Archival {
			a.Branch = p.Branch
			seq := next()
			it, dup := s.archivalInsert(seq, sc, a)
			if !dup {
				// A later item of the same batch must see this one.
				s.arch.addItem(it)
				pending = append(pending, it.Seq)
			}
			added = append(added, written{it, dup, seq})
		}
		return nil
	}, func() {
		for _, c := range cores {
			s.core.add(c)
		}
		for _, w := range added {
			if w.dup {
				s.indexWrite(w.item, w.dup, w.seq, p.Branch)
			}
		}
	})
	if err != nil {
		s.arch.removeItems(pending) // the batch was rolled back
	}
	return err
}

func (s *Store) CoreDelete(ctx context.Context, p memory.CoreKeyParams) error {
	if p.Key == "" {
		return invalid("CoreDelete: empty key")
	}
	if _, err := s.scope(ctx, p.Branch); err != nil {
		return err
	}
	var v coreVersion
	return s.tx(ctx, func(seq int64) error {
		v = s.coreDelete(seq, p.Branch, p.Key)
		return nil
	}, func() { s.core.add(v) })
}

// coreDelete writes a tombstone.
func (s *Store) coreDelete(seq int64, branch, key string) coreVersion {
	now := ms(s.now())
	s.row("core", seq, branch, key, "", 0, 0, 1, now)
	return coreVersion{entry: memory.CoreEntry{Key: key, Branch: branch, Seq: seq, Updated: fromMS(now)}, deleted: true}
}

func (s *Store) CoreGet(ctx context.Context, p memory.CoreKeyParams) (memory.CoreEntry, bool, error) {
	if p.Key == "" {
		return memory.CoreEntry{}, false, invalid("CoreGet: empty key")
	}
	sc, err := s.scope(ctx, p.Branch)
	if err != nil {
		return memory.CoreEntry{}, false, err
	}
	e, ok := s.core.get(sc, p.Key, s.now())
	if !ok {
		return memory.CoreEntry{}, false, nil
	}
	return e, true, nil
}

func (s *Store) CoreList(ctx context.Context, p memory.CoreListParams) ([]memory.CoreEntry, error) {
	sc, err := s.scope(ctx, p.Branch)
	if err != nil {
		return nil, err
	}
	return s.core.list(sc, s.now()), nil
}
