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
	// logAsk bounds a question to the server about the live output.
	logAsk = 5 * time.Second
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
// phase, ending when done is closed (the node's result arrived): it then
// reads on up to the last message the stream holds for the attempt.
//
// One ordered consumer reads the whole time (it is made again by the
// client after a server restart or a lost message). When done is closed
// and the server cannot say how far the output goes (a local run's server
// stops with its run), FollowLogs ends with what it has read: the whole
// logs come home with the node's artifacts.
func (q *Queue) FollowLogs(ctx context.Context, run, node string, attempt int, phase string, follow bool, done <-chan struct{}, out io.Writer) error {
	p := phase
	if p == "" {
		p = "*"
	}
	subject := LogSubject(run, node, attempt, p)
	var upto uint64 // the last stream sequence to read; 0: not known yet
	if !follow {
		last, err := q.lastLogSeq(ctx, subject)
		if err != nil || last == 0 {
			return err
		}
		upto = last
	}
	cons, err := q.js.OrderedConsumer(ctx, LogsStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		return fmt.Errorf("queue: live output of %s: %w", node, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("queue: live output of %s: %w", node, err)
	}
	defer it.Stop()
	type next struct {
		m   jetstream.Msg
		err error
	}
	msgs := make(chan next)
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		for {
			m, err := it.Next()
			select {
			case msgs <- next{m, err}:
			case <-stopped:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var seen uint64
	for {
		select {
		case n := <-msgs:
			if n.err != nil {
				return fmt.Errorf("queue: live output of %s: %w", node, n.err)
			}
			if meta, err := n.m.Metadata(); err == nil {
				seen = meta.Sequence.Stream
			}
			if _, err := out.Write(n.m.Data()); err != nil {
				return err
			}
			if phase != "" && n.m.Headers().Get(HeaderLogEnd) != "" {
				return nil
			}
			if upto != 0 && seen >= upto {
				return nil
			}
		case <-done:
			done = nil
			last, err := q.lastLogSeq(ctx, subject)
			if err != nil {
				q.log.Warn("queue: the node ended; the rest of its live output cannot be read", "node", node, "err", err)
				return nil
			}
			if last <= seen {
				return nil
			}
			upto = last
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// lastLogSeq is the stream sequence of the last message on subject in
// LogsStream, 0 when there is none. It asks for at most logAsk.
func (q *Queue) lastLogSeq(ctx context.Context, subject string) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, logAsk)
	defer cancel()
	s, err := q.js.Stream(ctx, LogsStream)
	if err != nil {
		return 0, fmt.Errorf("queue: live output: %w", err)
	}
	m, err := s.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("queue: live output: %w", err)
	}
	return m.Sequence, nil
}
