package queue

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hpcq/hpcq/pkg/schema"
	"github.com/nats-io/nats.go/jetstream"
)

// ResultKey identifies one result: a node's attempt.
type ResultKey struct {
	NodeID  string
	Attempt int
}

// Watch delivers a run's results and dead letters as they arrive, each
// (node, attempt) result at most once even when the server's dedup window
// has passed. Close it when done.
type Watch struct {
	Results     <-chan *schema.NodeResult
	DeadLetters <-chan DeadLetter
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	ctxs        []jetstream.ConsumeContext
}

// WatchRun starts reading the results of run from the beginning of its
// subject, and the dead letters of every pool that name run and were
// written after since. Results that do not validate are logged and skipped.
func (q *Queue) WatchRun(ctx context.Context, run string, since time.Time) (*Watch, error) {
	if err := schema.CheckToken("run_id", run, true); err != nil {
		return nil, err
	}
	results := make(chan *schema.NodeResult, 1024)
	dead := make(chan DeadLetter, 64)
	wctx, cancel := context.WithCancel(context.Background())
	w := &Watch{Results: results, DeadLetters: dead, cancel: cancel}
	setupCtx, scancel := withDefaultTimeout(ctx)
	defer scancel()

	rc, err := q.js.OrderedConsumer(setupCtx, ResultsStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{ResultSubject(run)},
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("queue: watch results of %s: %w", run, err)
	}
	seen := map[ResultKey]bool{}
	var mu sync.Mutex
	rcc, err := rc.Consume(func(m jetstream.Msg) {
		r, err := schema.DecodeResult(m.Data())
		if err != nil {
			q.log.Error("invalid result skipped", "subject", m.Subject(), "err", err)
			return
		}
		k := ResultKey{r.NodeID, r.Attempt}
		mu.Lock()
		dup := seen[k]
		seen[k] = true
		mu.Unlock()
		if dup {
			return
		}
		select {
		case results <- r:
		case <-wctx.Done():
		}
	}, q.watchOpts("results")...)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("queue: watch results of %s: %w", run, err)
	}
	w.ctxs = append(w.ctxs, rcc)

	start := since.Add(-time.Second)
	dc, err := q.js.OrderedConsumer(setupCtx, DLQStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{dlqPrefix + "*"},
		DeliverPolicy:  jetstream.DeliverByStartTimePolicy,
		OptStartTime:   &start,
	})
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("queue: watch dead letters of %s: %w", run, err)
	}
	dcc, err := dc.Consume(func(m jetstream.Msg) {
		d := decodeDeadLetter(m)
		if d.RunID != run {
			return
		}
		select {
		case dead <- d:
		case <-wctx.Done():
		}
	}, q.watchOpts("dead letters")...)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("queue: watch dead letters of %s: %w", run, err)
	}
	w.ctxs = append(w.ctxs, dcc)
	return w, nil
}

// watchHeartbeat: how soon a watch notices that its server or its
// consumer is gone (a stream leader lost on a cluster) and starts again
// where it was.
const watchHeartbeat = 5 * time.Second

// watchOpts are a watch's consume options: a short heartbeat, and its
// errors logged (the ordered consumer recovers from them by itself).
func (q *Queue) watchOpts(what string) []jetstream.PullConsumeOpt {
	return []jetstream.PullConsumeOpt{jetstream.PullHeartbeat(watchHeartbeat), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		q.log.Warn("queue: watch of " + what + ": " + err.Error() + " (it goes on)")
	})}
}

// Close stops the watch.
func (w *Watch) Close() {
	w.cancel()
	for _, c := range w.ctxs {
		c.Stop()
	}
}
