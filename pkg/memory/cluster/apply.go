package cluster

import (
	"context"
	"fmt"
	"strings"

	"github.com/hpcq/hpcq/pkg/memory"
)

// Apply writes a batch atomically: write.lua validates every op before it
// writes any.
func (s *Store) Apply(ctx context.Context, p memory.ApplyParams) error {
	now := s.now()
	r := &record{B: p.Branch}
	for _, c := range p.CoreSets {
		if err := checkCoreSet(&c); err != nil {
			return err
		}
		r.Ops = append(r.Ops, s.coreOp(p.Branch, c, now))
	}
	for _, k := range p.CoreDeletes {
		if k == "" {
			return fmt.Errorf("%w: CoreDelete: empty key", memory.ErrInvalid)
		}
		r.Ops = append(r.Ops, op{T: "core", B: p.Branch, K: k, D: 1})
	}
	for _, a := range p.Archival {
		if strings.TrimSpace(a.Text) == "" {
			return fmt.Errorf("%w: ArchivalWrite: empty text", memory.ErrInvalid)
		}
		r.Ops = append(r.Ops, s.archOp(p.Branch, a))
	}
	if len(r.Ops) == 0 {
		if _, err := s.readScope(ctx, p.Branch); err != nil {
			return err
		}
		return nil
	}
	return s.write(ctx, r)
}
