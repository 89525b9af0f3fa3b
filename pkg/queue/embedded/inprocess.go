package embedded

import (
	"errors"
	"net"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// An in-process client reaches the embedded server through a net.Pipe,
// whose Write returns only once the server's read loop has taken every
// byte. The nats.go client flushes while holding its connection's lock,
// so every goroutine publishing on the connection (a worker's slots
// acking their tasks, the results batcher, the scheduler's publishes)
// waited for the server's read loop to be scheduled. writeBehind takes
// the client's writes into a buffer and hands them to the pipe from a
// goroutine of its own, in order, so that the lock is released at once
// (measured: bench-queue drain at c=64 9-17% faster; BENCHMARKS.md).

// writeBehindLimit is how many bytes may wait for the pipe before a Write
// waits for room (until its write deadline): the server falling behind
// slows the client down instead of growing the buffer.
const writeBehindLimit = 4 << 20

// closeDrainTimeout bounds how long Close waits for the bytes still
// buffered to reach the server (the client flushes its last publishes,
// acks among them, just before it closes the connection).
const closeDrainTimeout = 10 * time.Second

// inProcess gives nats.go in-process connections to srv whose writes go
// through a writeBehind.
type inProcess struct{ srv *server.Server }

func (p inProcess) InProcessConn() (net.Conn, error) {
	c, err := p.srv.InProcessConn()
	if err != nil {
		return nil, err
	}
	return newWriteBehind(c, writeBehindLimit), nil
}

// writeBehind is a net.Conn whose Write copies into a buffer that one
// goroutine writes to the underlying connection in order. A failed write
// is returned by the next Write (and every one after it). Reads and read
// deadlines go to the underlying connection unchanged; the write deadline
// bounds a Write's wait for room in the buffer.
type writeBehind struct {
	net.Conn
	limit int

	mu       sync.Mutex
	cond     *sync.Cond // signals: data to write, room in buffer, drained, ended
	buf      []byte     // waiting for the writer goroutine
	spare    []byte     // the buffer the writer goroutine last wrote, reused
	err      error      // the first write error; sticky
	closed   bool
	deadline time.Time // for Write's wait for room
	timer    *time.Timer
	done     chan struct{} // closed when the writer goroutine returns
}

func newWriteBehind(c net.Conn, limit int) *writeBehind {
	w := &writeBehind{Conn: c, limit: limit, done: make(chan struct{})}
	w.cond = sync.NewCond(&w.mu)
	go w.loop()
	return w
}

// errWriteBehindClosed is returned by Write after Close.
var errWriteBehindClosed = errors.New("embedded: in-process connection closed")

func (w *writeBehind) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	// A write larger than the limit goes alone, once nothing is waiting.
	for w.err == nil && !w.closed && len(w.buf) > 0 && len(w.buf)+len(p) > w.limit {
		if !w.deadline.IsZero() && !time.Now().Before(w.deadline) {
			return 0, os.ErrDeadlineExceeded
		}
		w.cond.Wait()
	}
	switch {
	case w.err != nil:
		return 0, w.err
	case w.closed:
		return 0, errWriteBehindClosed
	}
	w.buf = append(w.buf, p...)
	w.cond.Broadcast()
	return len(p), nil
}

// loop writes the buffered bytes to the underlying connection until Close
// or a write error.
func (w *writeBehind) loop() {
	defer close(w.done)
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		for len(w.buf) == 0 && !w.closed && w.err == nil {
			w.cond.Wait()
		}
		if w.err != nil || len(w.buf) == 0 {
			return // failed, or closed with nothing left
		}
		data := w.buf
		// buf now holds spare's array: spare must not give it out again.
		w.buf, w.spare = w.spare[:0], nil
		w.cond.Broadcast() // room for waiting writers
		w.mu.Unlock()
		_, err := w.Conn.Write(data)
		w.mu.Lock()
		w.spare = data
		if cap(data) > 1<<20 {
			w.spare = nil // a burst's large buffer is not kept
		}
		if err != nil && w.err == nil {
			w.err = err
		}
		w.cond.Broadcast() // a Close waiting for the drain
	}
}

// SetWriteDeadline bounds the wait for room of the Writes that follow.
func (w *writeBehind) SetWriteDeadline(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.deadline = t
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	if !t.IsZero() {
		// Wake the writers waiting for room, so that they see the deadline.
		w.timer = time.AfterFunc(time.Until(t), func() {
			w.mu.Lock()
			w.cond.Broadcast()
			w.mu.Unlock()
		})
	}
	return nil
}

// SetDeadline sets the underlying connection's read deadline and this
// connection's write deadline.
func (w *writeBehind) SetDeadline(t time.Time) error {
	if err := w.Conn.SetReadDeadline(t); err != nil {
		return err
	}
	return w.SetWriteDeadline(t)
}

// Close waits, up to closeDrainTimeout, for the buffered bytes to be
// written, then closes the underlying connection. Bytes not written by
// then are lost, as with any connection closed under them.
func (w *writeBehind) Close() error {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		if w.timer != nil {
			w.timer.Stop()
		}
		// Time the drain out by closing the underlying connection, which
		// ends a Write blocked in it.
		t := time.AfterFunc(closeDrainTimeout, func() { w.Conn.Close() })
		defer t.Stop()
		w.cond.Broadcast()
	}
	w.mu.Unlock()
	<-w.done
	return w.Conn.Close()
}
