package schedcmd

import (
	"context"
	"log/slog"
	"os"
	"sync"

	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/filecache"
	"github.com/hpcq/hpcq/internal/stores"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// memoryCache keeps each served run's SQLite memory open, read-only, while
// its files stay as they were: opening it builds its in-memory indexes (1 s
// at 10,000 nodes), and the dashboard reads it for every node it shows. A
// read-only store takes no lock, so the run can go on or be resumed
// meanwhile; when its files change the next request opens it again, and
// the store opened before is closed once the requests using it are done.
// A run's memory in Redis is opened per request (every read goes to Redis).
type memoryCache struct {
	log *slog.Logger
	// open opens a run's memory for reading (stores.ReadMemory).
	open func(ctx context.Context, dir rundir.Dir, where map[string]string) (memory.Store, error)
	mu   sync.Mutex
	runs map[string]*openMemory
}

type openMemory struct {
	stamp [2]filecache.Stamp
	store memory.Store
	users int
	// stale: replaced, or the cache closed; closed when users reaches 0.
	stale bool
}

func newMemoryCache(cfg *config.Scheduler, log *slog.Logger) *memoryCache {
	return &memoryCache{log: log, runs: map[string]*openMemory{},
		open: func(ctx context.Context, dir rundir.Dir, where map[string]string) (memory.Store, error) {
			return stores.ReadMemory(ctx, cfg.Store, dir, where, log)
		}}
}

// get is the run's memory store, nil when its memory was off, and the
// function to call when done with it.
func (c *memoryCache) get(ctx context.Context, dir string) (memory.Store, func(), error) {
	info, err := rundir.Dir(dir).ReadInfo()
	if err != nil {
		return nil, nil, err
	}
	stamp, keep := memoryStamp(stores.MemoryFile(rundir.Dir(dir), info.Memory))
	if keep {
		c.mu.Lock()
		if m := c.runs[dir]; m != nil && m.stamp == stamp {
			m.users++
			c.mu.Unlock()
			return m.store, c.release(m), nil
		}
		c.mu.Unlock()
	}
	st, err := c.open(ctx, rundir.Dir(dir), info.Memory)
	if err != nil || st == nil {
		return nil, func() {}, err
	}
	m := &openMemory{stamp: stamp, store: st, users: 1, stale: !keep}
	if keep {
		c.mu.Lock()
		if old := c.runs[dir]; old != nil {
			old.stale = true
			if old.users == 0 {
				defer c.close(old)
			}
		}
		c.runs[dir] = m
		c.mu.Unlock()
	}
	return st, c.release(m), nil
}

func (c *memoryCache) release(m *openMemory) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			m.users--
			done := m.stale && m.users == 0
			c.mu.Unlock()
			if done {
				c.close(m)
			}
		})
	}
}

func (c *memoryCache) close(m *openMemory) {
	if err := m.store.Close(); err != nil {
		c.log.Warn("memory store close", "err", err)
	}
}

// closeAll closes the stores kept (those in use once their requests end).
func (c *memoryCache) closeAll() {
	c.mu.Lock()
	var idle []*openMemory
	for dir, m := range c.runs {
		m.stale = true
		if m.users == 0 {
			idle = append(idle, m)
		}
		delete(c.runs, dir)
	}
	c.mu.Unlock()
	for _, m := range idle {
		c.close(m)
	}
}

// memoryStamp says how a SQLite memory's files are (the database and its
// WAL; a missing one as the zero Stamp); ok is false for no file (a memory
// in Redis) or one that cannot be read.
func memoryStamp(file string) (stamp [2]filecache.Stamp, ok bool) {
	if file == "" {
		return stamp, false
	}
	for i, f := range []string{file, file + "-wal"} {
		st, err := filecache.StampOf(f)
		switch {
		case err == nil:
			stamp[i] = st
		case !os.IsNotExist(err):
			return stamp, false
		}
	}
	return stamp, true
}
