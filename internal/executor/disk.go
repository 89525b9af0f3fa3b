package executor

import (
	"context"
	"io/fs"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// diskEvery is how often a running phase's workspace is measured against
// its disk bound.
const diskEvery = time.Second

// diskUsage is what dir holds on disk (allocated blocks: a sparse file
// counts what it occupies), counted until it passes limit.
func diskUsage(dir string, limit int64) int64 {
	var used int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable: what can be read still counts
		}
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				used += st.Blocks * 512
			}
		}
		if used > limit {
			return filepath.SkipAll
		}
		return nil
	})
	return used
}

// diskWatch measures the workspace every diskEvery while a phase runs and
// cancels the phase's context once it holds more than limit bytes; over
// is what it held then (0: within the bound).
type diskWatch struct {
	over    atomic.Int64
	stop    chan struct{}
	done    chan struct{}
	stopped sync.Once
}

// halt stops the watch (once; again is nothing).
func (w *diskWatch) halt() {
	w.stopped.Do(func() { close(w.stop) })
	<-w.done
}

// watchDisk starts watching ws for a phase; ctx is the phase's context,
// cancel ends it.
func watchDisk(ws string, limit int64, cancel context.CancelFunc) *diskWatch {
	w := &diskWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(diskEvery)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
				if used := diskUsage(ws, limit); used > limit {
					w.over.Store(used)
					cancel()
					return
				}
			}
		}
	}()
	return w
}

// end stops the watch and gives what the workspace held over the bound
// (measured once more: a phase may have written fast and ended), 0 when
// within it.
func (w *diskWatch) end(ws string, limit int64) int64 {
	w.halt()
	if n := w.over.Load(); n > 0 {
		return n
	}
	if used := diskUsage(ws, limit); used > limit {
		return used
	}
	return 0
}
