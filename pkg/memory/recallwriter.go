package memory

import (
	"context"
	"errors"
	"slices"
	"sync"
)

// RecallWriter appends the recall events of nodes for a worker, which runs
// the tasks of many runs: one Memory per run (and redaction setting) over a
// store opened on first use. It keeps the stores of the last few runs open.
type RecallWriter struct {
	open func(ctx context.Context, run string) (Store, func() error, error)
	mu   sync.Mutex
	runs []*recallRun // most recently used last
	// shipping: the runs Ship has open, each with a channel closed when
	// it has closed the store again.
	shipping map[string]chan struct{}
}

type recallRun struct {
	run   string
	close func() error
	mems  map[bool]*Memory
	store Store
}

// recallRuns is how many runs' stores a RecallWriter keeps open.
const recallRuns = 8

// NewRecallWriter returns a writer that opens a run's store with open; the
// function it returns with the store closes it (nil: the store is not the
// writer's to close).
func NewRecallWriter(open func(ctx context.Context, run string) (Store, func() error, error)) *RecallWriter {
	return &RecallWriter{open: open}
}

// Append appends ev to branch of run, redacting secrets when redact.
func (w *RecallWriter) Append(ctx context.Context, run, branch string, redact bool, ev RecallEvent) error {
	m, err := w.memory(ctx, run, redact)
	if err != nil {
		return err
	}
	_, err = m.RecallAppend(ctx, branch, ev)
	return err
}

func (w *RecallWriter) memory(ctx context.Context, run string, redact bool) (*Memory, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.shipping[run] != nil {
		// One store per run's spool at a time: wait for Ship's to close.
		done := w.shipping[run]
		w.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			w.mu.Lock()
			return nil, ctx.Err()
		}
		w.mu.Lock()
	}
	var r *recallRun
	for i, x := range w.runs {
		if x.run == run {
			r = x
			w.runs = append(append(w.runs[:i:i], w.runs[i+1:]...), x)
			break
		}
	}
	if r == nil {
		st, closeFn, err := w.open(ctx, run)
		if err != nil {
			return nil, err
		}
		r = &recallRun{run: run, store: st, close: closeFn, mems: map[bool]*Memory{}}
		if len(w.runs) == recallRuns {
			if c := w.runs[0].close; c != nil {
				_ = c()
			}
			w.runs = w.runs[1:]
		}
		w.runs = append(w.runs, r)
	}
	m, ok := r.mems[redact]
	if !ok {
		m = New(r.store, Config{RedactSecrets: Bool(redact)}, Options{})
		r.mems[redact] = m
	}
	return m, nil
}

// Ship opens run's store and closes it again: opening replays what its
// spool holds, closing ships what the servers take. A worker does so at
// start for the runs its spools still hold writes of (written while a
// server was away, before it stopped): they would otherwise wait for its
// next task of the run, which may never come. A run the writer has open
// already (its store replays the spool) or is shipping is left alone;
// Append to run waits until Ship is done, Append to other runs does not.
func (w *RecallWriter) Ship(ctx context.Context, run string) error {
	w.mu.Lock()
	if w.shipping[run] != nil || slices.ContainsFunc(w.runs, func(r *recallRun) bool { return r.run == run }) {
		w.mu.Unlock()
		return nil
	}
	if w.shipping == nil {
		w.shipping = map[string]chan struct{}{}
	}
	done := make(chan struct{})
	w.shipping[run] = done
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.shipping, run)
		w.mu.Unlock()
		close(done)
	}()
	_, closeStore, err := w.open(ctx, run)
	if err != nil || closeStore == nil {
		return err
	}
	return closeStore()
}

// Close closes the stores the writer opened.
func (w *RecallWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var errs []error
	for _, r := range w.runs {
		if r.close != nil {
			errs = append(errs, r.close())
		}
	}
	w.runs = nil
	return errors.Join(errs...)
}
