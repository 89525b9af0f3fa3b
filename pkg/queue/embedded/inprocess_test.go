package embedded

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// readAll reads c until EOF or an error into a channel.
func readAll(c net.Conn) <-chan []byte {
	out := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(c)
		out <- b
	}()
	return out
}

// TestWriteBehindInOrder: every byte written reaches the other end once,
// in order, small writes and writes larger than the buffer's limit alike,
// and Close waits for them.
func TestWriteBehindInOrder(t *testing.T) {
	a, b := net.Pipe()
	w := newWriteBehind(a, 64)
	got := readAll(b)
	var want bytes.Buffer
	for i := range 2000 {
		p := bytes.Repeat([]byte{byte('a' + i%26)}, 1+(i*37)%200) // up to 200 bytes: past the limit
		want.Write(p)
		n, err := w.Write(p)
		require.NoError(t, err)
		require.Equal(t, len(p), n)
	}
	require.NoError(t, w.Close())
	require.Equal(t, want.Bytes(), <-got)
	_, err := w.Write([]byte("late"))
	require.ErrorIs(t, err, errWriteBehindClosed)
}

// TestWriteBehindLargeBursts: writes that pile up past a megabyte while
// the peer reads slowly (buffers the writer goroutine does not keep)
// arrive whole and in order.
func TestWriteBehindLargeBursts(t *testing.T) {
	a, b := net.Pipe()
	w := newWriteBehind(a, writeBehindLimit)
	got := make(chan []byte, 1)
	go func() {
		var all bytes.Buffer
		buf := make([]byte, 64<<10)
		for {
			n, err := b.Read(buf)
			all.Write(buf[:n])
			if err != nil {
				got <- all.Bytes()
				return
			}
			time.Sleep(100 * time.Microsecond) //nolint:forbidigo // a slow reader
		}
	}()
	var want bytes.Buffer
	for i := range 64 {
		p := bytes.Repeat([]byte{byte(i)}, 300<<10)
		p[0], p[len(p)-1] = 0xfe, 0xff
		want.Write(p)
		_, err := w.Write(p)
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	require.True(t, bytes.Equal(want.Bytes(), <-got), "the bytes arrive whole and in order")
}

// TestWriteBehindBufferInUse: a buffer the writer goroutine is writing
// is never the one later writes are appended to, after a burst past a
// megabyte (a buffer it does not keep) as before it.
func TestWriteBehindBufferInUse(t *testing.T) {
	a, b := net.Pipe()
	w := newWriteBehind(a, writeBehindLimit)
	defer w.Close()
	read := func(n int) string {
		p := make([]byte, n)
		_, err := io.ReadFull(b, p)
		require.NoError(t, err)
		return string(p)
	}
	write := func(p string) {
		_, err := w.Write([]byte(p))
		require.NoError(t, err)
		require.Eventually(t, func() bool { // taken by the writer goroutine
			w.mu.Lock()
			defer w.mu.Unlock()
			return len(w.buf) == 0
		}, 5*time.Second, time.Millisecond)
	}
	write("aaaaaaaa")
	require.Equal(t, "aaaaaaaa", read(8)) // its buffer is kept for reuse
	big := strings.Repeat("B", 2<<20)
	write(big) // blocked in the pipe until read
	_, err := w.Write([]byte("cccccccc"))
	require.NoError(t, err)
	require.Equal(t, big, read(len(big)))
	require.Eventually(t, func() bool { // "cccccccc" taken, blocked in the pipe
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.buf) == 0
	}, 5*time.Second, time.Millisecond)
	_, err = w.Write([]byte("dddddddd")) // while "cccccccc" waits for the reader
	require.NoError(t, err)
	require.Equal(t, "cccccccc", read(8))
	require.Equal(t, "dddddddd", read(8))
}

// TestWriteBehindCloseDrains: bytes still buffered when Close is called
// reach a peer that reads late (a client's last acks before it closes).
func TestWriteBehindCloseDrains(t *testing.T) {
	a, b := net.Pipe()
	w := newWriteBehind(a, 1<<20)
	for i := range 100 {
		_, err := fmt.Fprintf(w, "line %d\n", i)
		require.NoError(t, err)
	}
	got := make(chan []byte, 1)
	go func() { // the peer starts reading after Close began
		time.Sleep(100 * time.Millisecond) //nolint:forbidigo // the peer starts reading after Close began
		all, _ := io.ReadAll(b)
		got <- all
	}()
	require.NoError(t, w.Close())
	all := <-got
	require.Equal(t, 100, bytes.Count(all, []byte("\n")))
	require.True(t, bytes.HasSuffix(all, []byte("line 99\n")))
}

// TestWriteBehindBackpressure: with the buffer full and the peer not
// reading, a Write waits for room until its write deadline; once the peer
// has gone, Write returns the pipe's error and keeps returning it.
func TestWriteBehindBackpressure(t *testing.T) {
	a, b := net.Pipe()
	w := newWriteBehind(a, 16)
	_, err := w.Write(make([]byte, 16)) // taken by the writer goroutine, blocked in the pipe
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.buf) == 0
	}, 5*time.Second, time.Millisecond)
	_, err = w.Write(make([]byte, 16)) // fills the buffer
	require.NoError(t, err)
	require.NoError(t, w.SetWriteDeadline(time.Now().Add(50*time.Millisecond)))
	start := time.Now()
	_, err = w.Write([]byte("x"))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond)

	require.NoError(t, b.Close()) // the server goes away
	require.Eventually(t, func() bool {
		_, err := w.Write([]byte("x"))
		return err != nil && !os.IsTimeout(err)
	}, 5*time.Second, time.Millisecond)
	_, err = w.Write([]byte("x"))
	require.ErrorIs(t, err, io.ErrClosedPipe)
	require.NoError(t, w.SetWriteDeadline(time.Time{}))
	_ = w.Close()
}

// TestInProcessCloseDelivers: messages published on an in-process
// connection just before it is closed, without a flush, all reach the
// embedded server.
func TestInProcessCloseDelivers(t *testing.T) {
	e, err := Start(Options{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(e.Shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := e.Connect("admin")
	require.NoError(t, err)
	defer admin.Close()
	js, err := jetstream.New(admin)
	require.NoError(t, err)
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "CLOSE", Subjects: []string{"close.>"}})
	require.NoError(t, err)

	nc, err := e.Connect("publisher")
	require.NoError(t, err)
	const n = 20000
	payload := bytes.Repeat([]byte("p"), 100)
	for i := range n {
		require.NoError(t, nc.Publish(fmt.Sprintf("close.%d", i%7), payload))
	}
	nc.Close()
	require.Eventually(t, func() bool {
		info, err := s.Info(ctx)
		return err == nil && info.State.Msgs == n
	}, 20*time.Second, 10*time.Millisecond)
}
