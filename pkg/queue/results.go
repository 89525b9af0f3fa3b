package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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
	resultsMu   sync.Mutex
	results     jetstream.ConsumeContext // replaced by the watchdog
}

// WatchRun starts reading the results of run from the beginning of its
// subject, and the dead letters of every pool that name run and were
// written after since. Results that do not validate are logged and skipped.
//
// Long: two consumers (results, dead letters) started and torn down
// together; their error paths must undo each other in order.
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

	seen := map[ResultKey]bool{}
	var mu sync.Mutex
	var delivered atomic.Uint64 // stream sequence of the last result read
	handle := func(m jetstream.Msg) {
		if md, err := m.Metadata(); err == nil {
			delivered.Store(md.Sequence.Stream)
		}
		rs, errs := decodeResults(m.Headers().Get(batchHeader), m.Data())
		for _, err := range errs {
			q.log.Error("invalid result skipped", "subject", m.Subject(), "err", err)
		}
		for _, r := range rs {
			k := ResultKey{r.NodeID, r.Attempt}
			mu.Lock()
			dup := seen[k]
			seen[k] = true
			mu.Unlock()
			if dup {
				continue
			}
			select {
			case results <- r:
			case <-wctx.Done():
				return
			}
		}
	}
	consume := func(ctx context.Context, from uint64) (jetstream.ConsumeContext, error) {
		cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{ResultSubject(run)}}
		if from > 0 {
			cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
		}
		rc, err := q.js.OrderedConsumer(ctx, ResultsStream, cfg)
		if err != nil {
			return nil, err
		}
		return rc.Consume(handle, q.watchOpts("results")...)
	}
	rcc, err := consume(setupCtx, 0)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("queue: watch results of %s: %w", run, err)
	}
	w.results = rcc
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		q.watchdog(wctx, w, run, &delivered, consume)
	}()

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

// watchCheck: how often the watchdog compares what a watch read with
// what its stream holds.
const watchCheck = 10 * time.Second

// watchdog restarts the results watch from the last result it read when
// it stopped reading while the stream holds newer results of the run for
// two checks in a row. An ordered consumer can stop pulling without an
// error when its server dies or its stream's leader moves (seen on a NATS
// cluster of 3: results stored, none delivered, for minutes).
func (q *Queue) watchdog(ctx context.Context, w *Watch, run string, delivered *atomic.Uint64,
	consume func(context.Context, uint64) (jetstream.ConsumeContext, error)) {
	t := time.NewTicker(watchCheck)
	defer t.Stop()
	behind, prev := false, uint64(0) // behind at the previous check, having read up to prev
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := withDefaultTimeout(ctx)
		last, err := q.lastResultSeq(cctx, run)
		cancel()
		got := delivered.Load()
		if err != nil || last <= got {
			behind = false
			continue
		}
		if !behind || prev != got {
			behind, prev = true, got // give it until the next check
			continue
		}
		q.log.Warn("queue: the results watch stopped reading; starting it again from the last result read", "run", run,
			"read_up_to", got, "stored_up_to", last)
		cctx, cancel = withDefaultTimeout(ctx)
		cc, err := consume(cctx, got+1)
		cancel()
		if err != nil {
			q.log.Warn("queue: results watch not started again (tried next check)", "err", err)
			continue
		}
		w.resultsMu.Lock()
		old := w.results
		w.results = cc
		w.resultsMu.Unlock()
		old.Stop()
		behind = false
	}
}

// lastResultSeq is the stream sequence of the run's newest result (0: none).
func (q *Queue) lastResultSeq(ctx context.Context, run string) (uint64, error) {
	s, err := q.js.Stream(ctx, ResultsStream)
	if err != nil {
		return 0, err
	}
	m, err := s.GetLastMsgForSubject(ctx, ResultSubject(run))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return m.Sequence, nil
}

// Close stops the watch.
func (w *Watch) Close() {
	w.cancel()
	w.wg.Wait()
	w.resultsMu.Lock()
	if w.results != nil {
		w.results.Stop()
	}
	w.resultsMu.Unlock()
	for _, c := range w.ctxs {
		c.Stop()
	}
}
