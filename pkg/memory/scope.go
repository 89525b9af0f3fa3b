package memory

import (
	"context"
	"sync"
)

// ScopeEntry is one branch of a reader's visible set and the last seq
// visible from it.
type ScopeEntry struct {
	Branch string
	MaxSeq int64
}

// Scopes computes and caches the visible sets of branches, the one rule
// every store applies: a branch sees its own writes (up to Self, a store's
// "no bound") and, for each ancestor, the writes up to the seq at which the
// path forked from it. Branches never change, so a scope is computed once,
// from its parent's.
type Scopes struct {
	// Self is the bound of a branch's own entry.
	Self int64
	// Lookup reads a branch the cache does not have.
	Lookup func(ctx context.Context, id string) (Branch, error)
	m      sync.Map // id -> []ScopeEntry
}

// Get returns the scope of branch id.
func (s *Scopes) Get(ctx context.Context, id string) ([]ScopeEntry, error) {
	if v, ok := s.m.Load(id); ok {
		return v.([]ScopeEntry), nil
	}
	b, err := s.Lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.Of(ctx, b)
}

// Of computes (and caches) the scope of b from its parent's.
func (s *Scopes) Of(ctx context.Context, b Branch) ([]ScopeEntry, error) {
	out := []ScopeEntry{{Branch: b.ID, MaxSeq: s.Self}}
	if b.Parent != "" {
		parent, err := s.Get(ctx, b.Parent)
		if err != nil {
			return nil, err
		}
		for i, e := range parent {
			if i == 0 {
				e.MaxSeq = b.ForkSeq
			}
			out = append(out, e)
		}
	}
	s.m.Store(b.ID, out)
	return out, nil
}
