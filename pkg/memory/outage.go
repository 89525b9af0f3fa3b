package memory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

var (
	// ErrUnavailable: a server the store needs cannot be reached; the call
	// changed nothing and may be made again. Backends wrap it with detail
	// (writes they spool are acknowledged and never fail with it).
	ErrUnavailable = errors.New("server unavailable")
	// ErrOutage: the store stayed unavailable for longer than an
	// OutageStore's limit.
	ErrOutage = errors.New("memory: outage longer than the limit")
	// ErrLost: the store answers but no longer holds the run's memory (its
	// root branch is gone: a Redis that restarted without its data). Like
	// an outage it stops the run, resumable once the data is restored;
	// nodes are not failed for it.
	ErrLost = errors.New("memory: the store no longer holds this run's memory")
)

// OutageOptions configure an OutageStore. Zero values take the defaults in
// brackets.
type OutageOptions struct {
	// Max is how long an outage may last before calls give up with
	// ErrOutage [10m] (HPCQ_OUTAGE_MAX).
	Max time.Duration
	// Backoff is the first wait between attempts, doubled up to MaxBackoff
	// [500ms, 10s].
	Backoff, MaxBackoff time.Duration
	Logger              *slog.Logger
	// Now is the clock [time.Now].
	Now func() time.Time
}

// OutageStore wraps a Store so that a server outage pauses its callers
// rather than failing them: a call that fails with ErrUnavailable is made
// again with backoff until the server answers, and fails with ErrOutage
// (wrapping the last error) once the outage has lasted Max. The outage is
// one for all callers: it starts at the first failure and ends at the
// first success; Wait blocks while it lasts, so a caller can hold back new
// work. Errors other than ErrUnavailable pass through at once.
type OutageStore struct {
	Store
	o OutageOptions

	mu     sync.Mutex
	since  time.Time // zero: no outage
	reason error
	back   chan struct{} // closed when the outage ends
}

var _ Store = (*OutageStore)(nil)

// NewOutageStore wraps s.
func NewOutageStore(s Store, o OutageOptions) *OutageStore {
	if o.Max <= 0 {
		o.Max = 10 * time.Minute
	}
	if o.Backoff <= 0 {
		o.Backoff = 500 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &OutageStore{Store: s, o: o}
}

// Outage reports whether an outage is going on, since when and why.
func (s *OutageStore) Outage() (since time.Time, reason error, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.since, s.reason, !s.since.IsZero()
}

// Wait returns at once when no outage is going on, else when it ends (nil),
// when it has lasted Max (ErrOutage) or when ctx ends.
func (s *OutageStore) Wait(ctx context.Context) error {
	for {
		s.mu.Lock()
		if s.since.IsZero() {
			s.mu.Unlock()
			return nil
		}
		back, left, reason := s.back, s.o.Max-s.o.Now().Sub(s.since), s.reason
		s.mu.Unlock()
		if left <= 0 {
			return s.outageErr(reason)
		}
		t := time.NewTimer(min(left, s.o.MaxBackoff))
		select {
		case <-back:
			t.Stop()
			return nil
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

func (s *OutageStore) outageErr(reason error) error {
	return fmt.Errorf("%w (%v): %w", ErrOutage, s.o.Max, reason)
}

// failed records a failure; it returns false when the outage has lasted Max.
func (s *OutageStore) failed(err error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reason = err
	if s.since.IsZero() {
		s.since, s.back = s.o.Now(), make(chan struct{})
		s.o.Logger.Warn("memory store unreachable: the run holds its nodes until it is back", "limit", s.o.Max, "err", err)
		return true
	}
	return s.o.Now().Sub(s.since) < s.o.Max
}

func (s *OutageStore) succeeded() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.since.IsZero() {
		return
	}
	s.o.Logger.Info("memory store back: the run goes on", "outage", s.o.Now().Sub(s.since).Round(time.Millisecond))
	close(s.back)
	s.since, s.reason, s.back = time.Time{}, nil, nil
}

// retry runs call until it does not fail with ErrUnavailable.
func retry[T any](ctx context.Context, s *OutageStore, call func() (T, error)) (T, error) {
	wait := s.o.Backoff
	for {
		v, err := call()
		if !errors.Is(err, ErrUnavailable) {
			if err == nil {
				s.succeeded()
			}
			return v, err
		}
		if !s.failed(err) {
			return v, s.outageErr(err)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return v, fmt.Errorf("%w (while waiting out: %w)", ctx.Err(), err)
		}
		wait = min(2*wait, s.o.MaxBackoff)
	}
}

func retryErr(ctx context.Context, s *OutageStore, call func() error) error {
	_, err := retry(ctx, s, func() (struct{}, error) { return struct{}{}, call() })
	return err
}

func (s *OutageStore) Fork(ctx context.Context, p ForkParams) (Branch, error) {
	return retry(ctx, s, func() (Branch, error) { return s.Store.Fork(ctx, p) })
}

func (s *OutageStore) BranchGet(ctx context.Context, id string) (Branch, error) {
	return retry(ctx, s, func() (Branch, error) { return s.Store.BranchGet(ctx, id) })
}

func (s *OutageStore) CoreSet(ctx context.Context, p CoreSetParams) (CoreEntry, error) {
	return retry(ctx, s, func() (CoreEntry, error) { return s.Store.CoreSet(ctx, p) })
}

func (s *OutageStore) CoreDelete(ctx context.Context, p CoreKeyParams) error {
	return retryErr(ctx, s, func() error { return s.Store.CoreDelete(ctx, p) })
}

func (s *OutageStore) CoreGet(ctx context.Context, p CoreKeyParams) (CoreEntry, bool, error) {
	var ok bool
	e, err := retry(ctx, s, func() (CoreEntry, error) {
		var e CoreEntry
		var err error
		e, ok, err = s.Store.CoreGet(ctx, p)
		return e, err
	})
	return e, ok, err
}

func (s *OutageStore) CoreList(ctx context.Context, p CoreListParams) ([]CoreEntry, error) {
	return retry(ctx, s, func() ([]CoreEntry, error) { return s.Store.CoreList(ctx, p) })
}

func (s *OutageStore) RecallAppend(ctx context.Context, p RecallAppendParams) (RecallEvent, error) {
	return retry(ctx, s, func() (RecallEvent, error) { return s.Store.RecallAppend(ctx, p) })
}

func (s *OutageStore) RecallList(ctx context.Context, p RecallListParams) ([]RecallEvent, int, error) {
	var total int
	evs, err := retry(ctx, s, func() ([]RecallEvent, error) {
		var evs []RecallEvent
		var err error
		evs, total, err = s.Store.RecallList(ctx, p)
		return evs, err
	})
	return evs, total, err
}

func (s *OutageStore) RecallSearch(ctx context.Context, p RecallSearchParams) ([]RecallEvent, error) {
	return retry(ctx, s, func() ([]RecallEvent, error) { return s.Store.RecallSearch(ctx, p) })
}

func (s *OutageStore) RecallSummaryGet(ctx context.Context, branch string) (RecallSummary, error) {
	return retry(ctx, s, func() (RecallSummary, error) { return s.Store.RecallSummaryGet(ctx, branch) })
}

func (s *OutageStore) RecallUnfolded(ctx context.Context, branch string, limit int) (RecallSummary, int, error) {
	var n int
	sum, err := retry(ctx, s, func() (RecallSummary, error) {
		var sum RecallSummary
		var err error
		sum, n, err = s.Store.RecallUnfolded(ctx, branch, limit)
		return sum, err
	})
	return sum, n, err
}

// View reads through the wrapped store's View when it has one, in one
// retried request.
func (s *OutageStore) View(ctx context.Context, p ViewParams) (View, error) {
	return retry(ctx, s, func() (View, error) { return ReadView(ctx, s.Store, p) })
}

func (s *OutageStore) RecallSummarySet(ctx context.Context, p RecallSummarySetParams) error {
	return retryErr(ctx, s, func() error { return s.Store.RecallSummarySet(ctx, p) })
}

func (s *OutageStore) ArchivalWrite(ctx context.Context, p ArchivalWriteParams) (ArchivalItem, bool, error) {
	var dup bool
	it, err := retry(ctx, s, func() (ArchivalItem, error) {
		var it ArchivalItem
		var err error
		it, dup, err = s.Store.ArchivalWrite(ctx, p)
		return it, err
	})
	return it, dup, err
}

func (s *OutageStore) ArchivalSearch(ctx context.Context, p ArchivalSearchParams) ([]ArchivalItem, error) {
	return retry(ctx, s, func() ([]ArchivalItem, error) { return s.Store.ArchivalSearch(ctx, p) })
}

func (s *OutageStore) Apply(ctx context.Context, p ApplyParams) error {
	return retryErr(ctx, s, func() error { return s.Store.Apply(ctx, p) })
}

// Flush passes on to the wrapped store's Flush, when it has one (the
// cluster store: every acknowledged write applied).
func (s *OutageStore) Flush(ctx context.Context) error {
	if f, ok := s.Store.(interface{ Flush(context.Context) error }); ok {
		return f.Flush(ctx)
	}
	return nil
}
