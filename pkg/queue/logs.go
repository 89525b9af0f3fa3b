package queue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// HeaderLogEnd marks the last message of a phase's live output.
const HeaderLogEnd = "Hpcq-Log-End"

// Live output is sent in chunks of at most logChunk bytes, at least every
// logFlush while output comes.
const (
	logChunk = 32 << 10
	logFlush = 250 * time.Millisecond
)

// LogWriter streams a task attempt's phase output to LogsStream while it
// runs. Writes never block on the server and never fail: the output is
// buffered and sent in chunks with plain publishes (the stream stores
// them); what cannot be sent is dropped (the whole log comes home as an
// artifact). Close sends the rest and the end marker.
type LogWriter struct {
	nc      *nats.Conn
	subject string
	mu      sync.Mutex
	buf     []byte
	timer   *time.Timer
	closed  bool
}

// LogWriter returns the live writer of one phase of a task attempt.
func (q *Queue) LogWriter(run, node string, attempt int, phase string) *LogWriter {
	return &LogWriter{nc: q.nc, subject: LogSubject(run, node, attempt, phase)}
}

// Write buffers p; a full chunk is sent at once, the rest within logFlush.
func (w *LogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	for len(w.buf) >= logChunk {
		w.send(w.buf[:logChunk], false)
		w.buf = w.buf[logChunk:]
	}
	if len(w.buf) > 0 && w.timer == nil {
		w.timer = time.AfterFunc(logFlush, w.flush)
	}
	return len(p), nil
}

func (w *LogWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer = nil
	if len(w.buf) > 0 && !w.closed {
		w.send(w.buf, false)
		w.buf = w.buf[:0]
	}
}

// send publishes data; the caller holds w.mu.
func (w *LogWriter) send(data []byte, end bool) {
	m := nats.NewMsg(w.subject)
	m.Data = append([]byte(nil), data...)
	if end {
		m.Header.Set(HeaderLogEnd, "1")
	}
	_ = w.nc.PublishMsg(m) // best effort: the artifact has the whole log
}

// Close sends what is buffered and the end marker.
func (w *LogWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	w.send(w.buf, true)
	w.buf = nil
	return nil
}

// FollowLogs writes the live output of a task attempt to out: what was sent
// so far, then (with follow) what comes, until every phase in phases sent
// its end marker, done is closed, or ctx ends. phase "" follows every
// phase, ending when done is closed (the node's result arrived).
func (q *Queue) FollowLogs(ctx context.Context, run, node string, attempt int, phase string, follow bool, done <-chan struct{}, out io.Writer) error {
	p := phase
	if p == "" {
		p = "*"
	}
	cons, err := q.js.OrderedConsumer(ctx, LogsStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{LogSubject(run, node, attempt, p)},
	})
	if err != nil {
		return fmt.Errorf("queue: live output of %s: %w", node, err)
	}
	for {
		batch, err := cons.FetchNoWait(256)
		if err != nil {
			return fmt.Errorf("queue: live output of %s: %w", node, err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			if _, err := out.Write(m.Data()); err != nil {
				return err
			}
			if phase != "" && m.Headers().Get(HeaderLogEnd) != "" {
				return nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return fmt.Errorf("queue: live output of %s: %w", node, err)
		}
		if n > 0 {
			continue
		}
		if !follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
			follow = false // one more read for what came last
		case <-time.After(200 * time.Millisecond):
		}
	}
}
