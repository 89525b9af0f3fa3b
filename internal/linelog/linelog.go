// Package linelog appends lines to a log file in batches: a line written
// reaches the file within the flush interval, or at once when a batch has
// grown to MaxBatch, and every line reaches it at Close. A batch is one
// write(2) of whole lines to a file opened with O_APPEND, so that several
// processes appending to one file (runs sharing a memory log directory)
// never interleave inside a line.
//
// It is for logs written many times per node whose last lines may be lost
// if the process is killed (the memory call log: about 13 lines per node,
// each its own system call before): at most the last interval's lines are,
// never part of one.
package linelog

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// MaxBatch is the size at which a batch is written without waiting.
const MaxBatch = 64 << 10

// Writer is a log file written in batches. Its methods are safe for
// concurrent use.
type Writer struct {
	every time.Duration
	mu    sync.Mutex
	f     *os.File
	buf   []byte
	armed bool  // a flush is scheduled
	err   error // the last failed write, returned by the next Write
}

// Open opens (creating if needed) the file at path for appending; lines
// wait at most every before they are written.
func Open(path string, every time.Duration) (*Writer, error) {
	if every <= 0 {
		return nil, fmt.Errorf("linelog: flush interval %v", every)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &Writer{every: every, f: f}, nil
}

// Write adds p, whole lines, to the batch. An error is that of a batch's
// write not yet reported (its lines are lost): the one this call made or
// an earlier one; or the log closed.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return 0, os.ErrClosed
	}
	w.buf = append(w.buf, p...)
	if len(w.buf) >= MaxBatch {
		w.flushLocked()
	} else if !w.armed {
		w.armed = true
		time.AfterFunc(w.every, w.timed)
	}
	err := w.err
	w.err = nil
	return len(p), err
}

// timed is the scheduled flush.
func (w *Writer) timed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed = false
	if w.f != nil {
		w.flushLocked()
	}
}

// flushLocked writes the batch; the caller holds w.mu.
func (w *Writer) flushLocked() {
	if len(w.buf) == 0 {
		return
	}
	if _, err := w.f.Write(w.buf); err != nil {
		w.err = err
	}
	if cap(w.buf) > 4*MaxBatch { // after a huge line
		w.buf = nil
	} else {
		w.buf = w.buf[:0]
	}
}

// Close writes what is waiting and closes the file. It reports the last
// failed write not yet reported, and closing's error.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return os.ErrClosed
	}
	w.flushLocked()
	err := errors.Join(w.err, w.f.Close())
	w.f, w.err = nil, nil
	return err
}
