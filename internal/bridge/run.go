package bridge

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrServerGone: the NATS server was away longer than server_gone_exit.
var ErrServerGone = errors.New("bridge: the NATS server is gone")

// Run checks the queue every Interval and submits the worker jobs the
// backlog needs, until ctx ends, or until the NATS server has been away
// server_gone_exit (ErrServerGone: a scheduler job's server ends with its
// job). While the server is away it says so once, not at every look.
func (b *Bridge) Run(ctx context.Context) error {
	b.mu.Lock()
	every, goneExit := b.cfg.Interval, b.cfg.ServerGoneExit
	b.mu.Unlock()
	t := time.NewTicker(every)
	defer t.Stop()
	var away time.Time // when the server went away; zero while it answers
	for {
		connected := b.q == nil || b.q.Conn() == nil || b.q.Conn().IsConnected()
		switch {
		case connected && !away.IsZero():
			b.log.Info("the NATS server answers again", "away", time.Since(away).Round(time.Second))
			away = time.Time{}
		case !connected && away.IsZero():
			away = time.Now()
			wait := "it waits for it without end (server_gone_exit < 0)"
			if goneExit > 0 {
				wait = fmt.Sprintf("it stops, cancelling its jobs, if the server is not back within %v (server_gone_exit)", goneExit)
			}
			b.log.Warn("the NATS server is away (did the scheduler's job end?): the bridge submits nothing; " + wait)
		case !connected && goneExit > 0 && time.Since(away) >= goneExit:
			return fmt.Errorf("%w: away since %s (server_gone_exit %v)", ErrServerGone, away.Format(time.RFC3339), goneExit)
		}
		if connected {
			if err := b.Tick(ctx); err != nil && ctx.Err() == nil {
				b.log.Warn("bridge tick", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
