package executor

import (
	"fmt"
	"sync"

	"github.com/hpcq/hpcq/internal/textcut"
)

// Capture keeps a bounded view of a stream: the first and the last bytes
// of it, counting what it drops in between. Its memory stays within its
// limit whatever the volume written. It is safe for concurrent use.
type Capture struct {
	mu    sync.Mutex
	head  []byte
	tail  []byte // ring buffer
	start int    // index of the oldest byte in tail once full
	limH  int
	limT  int
	total int64
}

// NewCapture keeps up to limit bytes: a quarter from the start of the
// stream, the rest from its end.
func NewCapture(limit int) *Capture {
	if limit < 16 {
		limit = 16
	}
	h := limit / 4
	return &Capture{limH: h, limT: limit - h}
}

// Write never fails and never blocks on volume.
func (c *Capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	c.total += int64(n)
	if room := c.limH - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	if len(p) >= c.limT {
		c.tail = append(c.tail[:0], p[len(p)-c.limT:]...)
		c.start = 0
		return n, nil
	}
	for len(p) > 0 {
		if len(c.tail) < c.limT {
			k := min(c.limT-len(c.tail), len(p))
			c.tail = append(c.tail, p[:k]...)
			p = p[k:]
			continue
		}
		k := copy(c.tail[c.start:], p)
		c.start = (c.start + k) % c.limT
		p = p[k:]
	}
	return n, nil
}

// Total is the number of bytes written so far.
func (c *Capture) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// Dropped is the number of bytes written but not kept.
func (c *Capture) Dropped() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total - int64(len(c.head)+len(c.tail))
}

// String is what was kept, with a marker where bytes were dropped.
func (c *Capture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	tail := make([]byte, 0, len(c.tail))
	tail = append(tail, c.tail[c.start:]...)
	tail = append(tail, c.tail[:c.start]...)
	dropped := c.total - int64(len(c.head)+len(c.tail))
	if dropped == 0 {
		return string(c.head) + string(tail)
	}
	return fmt.Sprintf("%s\n[... %d bytes dropped ...]\n%s", c.head, dropped, tail)
}

// Tail returns at most n bytes from the end of what was kept (with the
// dropped-bytes marker if the cut falls before it), copying only those.
func (c *Capture) Tail(n int) string {
	c.mu.Lock()
	kept := len(c.head) + len(c.tail)
	c.mu.Unlock()
	if kept <= n {
		s := c.String()
		return s[textcut.Ceil(s, len(s)-n):]
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.tail) >= n {
		// The last n bytes of the ring, in order.
		out := make([]byte, 0, n)
		end := c.start // one past the newest byte, cyclically
		if len(c.tail) < c.limT {
			end = len(c.tail)
		}
		from := end - n
		if from >= 0 {
			out = append(out, c.tail[from:end]...)
		} else {
			out = append(out, c.tail[len(c.tail)+from:]...)
			out = append(out, c.tail[:end]...)
		}
		return string(out)
	}
	c.mu.Unlock()
	s := c.String()
	c.mu.Lock()
	return s[textcut.Ceil(s, len(s)-n):]
}
