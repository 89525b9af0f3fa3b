package sqlite

import (
	"context"
	"fmt"

	"github.com/hpcq/hpcq/pkg/memory"
)

// Fork creates a branch; with no parent, a root.
func (s *Store) Fork(ctx context.Context, p memory.ForkParams) (memory.Branch, error) {
	if p.Branch == "" {
		return memory.Branch{}, invalid("Fork: empty branch id")
	}
	var b memory.Branch
	err := s.tx(ctx, func(seq int64) error {
		depth := 0
		if p.Parent != "" {
			v, ok := s.branches.Load(p.Parent)
			if !ok {
				return fmt.Errorf("%w: parent %q of %q", memory.ErrNoBranch, p.Parent, p.Branch)
			}
			depth = v.(memory.Branch).Depth + 1
		}
		if _, ok := s.branches.Load(p.Branch); ok {
			return fmt.Errorf("%w: %q", memory.ErrBranchExists, p.Branch)
		}
		now := s.now()
		// The fork sees every write up to the seq taken now: seq-1 and
		// before were acknowledged by earlier writes.
		b = memory.Branch{ID: p.Branch, Parent: p.Parent, ForkSeq: seq, Depth: depth, Created: fromMS(ms(now))}
		s.row("branch", b.ID, b.Parent, b.ForkSeq, b.Depth, ms(now))
		return nil
	}, func() { s.branches.Store(b.ID, b) })
	if err == nil {
		_, err = s.scopes.Of(ctx, b)
	}
	return b, err
}

// BranchGet reads a branch.
func (s *Store) BranchGet(ctx context.Context, id string) (memory.Branch, error) {
	v, ok := s.branches.Load(id)
	if !ok {
		return memory.Branch{}, fmt.Errorf("%w: %q", memory.ErrNoBranch, id)
	}
	return v.(memory.Branch), nil
}

// scope is the visible set of a branch (memory.Scopes): itself with no
// seq bound, then each ancestor up to the seq at which the path forked from
// it. Fork fills it in at once.
func (s *Store) scope(ctx context.Context, id string) ([]scopeEntry, error) {
	return s.scopes.Get(ctx, id)
}
