package engine

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// flush waits until the writes the run made are in their servers: the
// memory store's spool and the results spool are replayed by the stores
// themselves when a server is back. It waits up to OutageMax (15 s after an
// outage already ended the run) and says what is left and how it will be
// applied.
func (e *engine) flush(ctx context.Context, stoppedBy string) []string {
	limit := e.s.OutageMax
	if e.outageStop.Load() {
		limit = 15 * time.Second // the servers were away for OutageMax already
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	type flusher interface{ Flush(context.Context) error }
	var left []string
	for _, x := range []struct {
		what, how string
		f         any
	}{
		{"memory", "they are applied when this run's memory store is opened again (scheduler run --resume or scheduler export --run-dir " +
			e.s.Dir + ", with the same HPCQ_SPOOL_DIR)", e.s.MemoryStore},
		{"results", "they are inserted by the next scheduler process with the same HPCQ_SPOOL_DIR (scheduler export --run-dir " + e.s.Dir + ")",
			e.p.Results},
	} {
		f, ok := x.f.(flusher)
		if !ok || x.f == nil {
			continue
		}
		start := time.Now()
		if err := e.flushOne(ctx, f.Flush, x.what, x.how, limit); err != nil {
			msg := fmt.Sprintf("%s: writes not yet applied after %v (%v); %s", x.what, time.Since(start).Round(time.Second), err, x.how)
			e.s.Log.Warn("writes left in the spool", "store", x.what, "err", err)
			left = append(left, msg)
		}
	}
	return left
}

// errAbandoned: a second interrupt ended the wait for the spooled writes.
var errAbandoned = errors.New("left in the spool at a second interrupt")

// flushSay is how long a flush goes before the run says what it waits for.
const flushSay = 2 * time.Second

// flushOne waits for one store's writes to reach its server: past flushSay
// it says what it waits for, how long it may, and that a second interrupt
// leaves them in the spool; Params.Abandon closed ends the wait.
func (e *engine) flushOne(ctx context.Context, flush func(context.Context) error, what, how string, limit time.Duration) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTimer(flushSay)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-e.p.Abandon:
				cancel(errAbandoned)
				return
			case <-t.C:
				msg := fmt.Sprintf("waiting for the %s writes to reach their server (up to %s); interrupt again to leave them in the spool: %s", what, limit, how)
				e.s.Log.Warn(msg)
				if e.p.Progress != nil {
					fmt.Fprintln(e.p.Progress, msg)
				}
			}
		}
	}()
	err := flush(ctx)
	if err != nil && errors.Is(context.Cause(ctx), errAbandoned) {
		return errAbandoned
	}
	return err
}
