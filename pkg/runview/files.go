package runview

import (
	"os"
	"sync"
	"syscall"
	"time"
)

// files keeps what was read of the run directories' files, each with the
// stamp (size, modification time, inode) it had when read.
var files = &fileCache{limit: 200_000}

// fileCache maps a path to what a reader made of it. A file whose stamp
// changed (written again, replaced by a rename, appended to) is read again;
// a file that went away is forgotten. Past limit entries it starts afresh.
type fileCache struct {
	mu    sync.Mutex
	limit int
	byKey map[fileKey]cached
}

type fileKey struct {
	path string
	// kind names what was made of the file (two readers may read a path).
	kind string
}

type stamp struct {
	size  int64
	mod   time.Time
	inode uint64
}

type cached struct {
	stamp stamp
	value any
}

func stampOf(fi os.FileInfo) stamp {
	s := stamp{size: fi.Size(), mod: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.inode = st.Ino
	}
	return s
}

// get is read(path), or what it gave when the file was as it is now; kind
// names the reader. An error (the file missing included) is not kept.
func (c *fileCache) get(path, kind string, read func(string) (any, error)) (any, error) {
	fi, err := os.Stat(path)
	key := fileKey{path, kind}
	if err != nil {
		c.mu.Lock()
		delete(c.byKey, key)
		c.mu.Unlock()
		return nil, err
	}
	st := stampOf(fi)
	c.mu.Lock()
	e, ok := c.byKey[key]
	c.mu.Unlock()
	if ok && e.stamp == st {
		return e.value, nil
	}
	v, err := read(path)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.byKey == nil || len(c.byKey) >= c.limit {
		c.byKey = map[fileKey]cached{}
	}
	c.byKey[key] = cached{st, v}
	c.mu.Unlock()
	return v, nil
}
