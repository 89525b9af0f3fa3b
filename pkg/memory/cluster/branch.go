package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/hpcq/hpcq/pkg/memory"
)

func (s *Store) Fork(ctx context.Context, p memory.ForkParams) (memory.Branch, error) {
	if p.Branch == "" {
		return memory.Branch{}, fmt.Errorf("%w: Fork: empty branch id", memory.ErrInvalid)
	}
	if err := s.readable(ctx); err != nil {
		return memory.Branch{}, err
	}
	// A fork is not spooled: its caller needs its seq now. It carries a
	// write id all the same, so that a retry after a lost reply is refused
	// as ErrBranchExists rather than applied twice.
	var id [12]byte
	_, _ = rand.Read(id[:])
	r := &record{W: hex.EncodeToString(id[:]), TS: s.now().UnixMilli(), Ops: []op{{T: "fork", B: p.Branch, Parent: p.Parent}}}
	rep, err := s.eval(ctx, r)
	if err != nil {
		return memory.Branch{}, unavailable("fork "+p.Branch, err)
	}
	if rep.Err != "" {
		return memory.Branch{}, replyErr(rep, r)
	}
	b := memory.Branch{ID: p.Branch, Parent: p.Parent, ForkSeq: rep.R[0].S, Depth: rep.R[0].Depth, Created: time.UnixMilli(r.TS).UTC()}
	if _, err := s.scopes.Of(ctx, b); err != nil {
		return b, err
	}
	return b, nil
}

func (s *Store) BranchGet(ctx context.Context, id string) (memory.Branch, error) {
	if err := s.readable(ctx); err != nil {
		return memory.Branch{}, err
	}
	return s.branchGet(ctx, id)
}

// branchGet reads a branch record; the replayer uses it while reads wait.
func (s *Store) branchGet(ctx context.Context, id string) (memory.Branch, error) {
	m, err := s.rdb.HGetAll(ctx, s.prefix+"branch:"+id).Result()
	if err != nil {
		return memory.Branch{}, unavailable("read branch", err)
	}
	if len(m) == 0 {
		return memory.Branch{}, fmt.Errorf("%w: %q", memory.ErrNoBranch, id)
	}
	b := memory.Branch{ID: id, Parent: m["parent"]}
	b.ForkSeq, _ = strconv.ParseInt(m["fork_seq"], 10, 64)
	b.Depth, _ = strconv.Atoi(m["depth"])
	created, _ := strconv.ParseInt(m["created_ms"], 10, 64)
	b.Created = time.UnixMilli(created).UTC()
	return b, nil
}

// scope is the branch's visible set (memory.Scopes): itself unbounded,
// then each ancestor up to the seq at which the path forked from it.
func (s *Store) scope(ctx context.Context, id string) ([]scopeEntry, error) {
	return s.scopes.Get(ctx, id)
}

// readScope checks the store can serve a read of branch and returns its scope.
func (s *Store) readScope(ctx context.Context, branch string) ([]scopeEntry, error) {
	if err := s.readable(ctx); err != nil {
		return nil, err
	}
	return s.scope(ctx, branch)
}
