// Package filecache keeps what was made of files read from run
// directories, and reads a file again only once it changed: the dashboard
// lists a run's nodes and counts its results on every page it serves, and
// a run of 10,000 nodes has 20,000 such files.
package filecache

import (
	"os"
	"sync"
	"syscall"
	"time"
)

// files keeps what was made of files, each with the stamp (size,
// modification time, inode) the file had when read.
var files = &cache{limit: 200_000}

// Get is read(path), or what it gave when the file was as it is now; kind
// names what read makes of the file (two readers may read one path), and
// its value must not be changed by callers. A file whose stamp changed
// (written again, replaced by a rename, appended to) is read again; a file
// that went away is forgotten. An error, the file missing included, is not
// kept.
func Get(path, kind string, read func(string) (any, error)) (any, error) {
	return files.get(path, kind, read)
}

// cache maps a path and kind to a value. Past limit entries it starts
// afresh.
type cache struct {
	mu    sync.Mutex
	limit int
	byKey map[fileKey]cached
}

type fileKey struct {
	path string
	// kind names what was made of the file (two readers may read a path).
	kind string
}

// Stamp is how a file is: equal stamps, an unchanged file (as far as its
// size, modification time and inode tell).
type Stamp struct {
	size  int64
	mod   time.Time
	inode uint64
}

// StampOf is path's stamp, or the error of its stat.
func StampOf(path string) (Stamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return Stamp{}, err
	}
	return stampOf(fi), nil
}

type cached struct {
	stamp Stamp
	value any
}

func stampOf(fi os.FileInfo) Stamp {
	s := Stamp{size: fi.Size(), mod: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.inode = st.Ino
	}
	return s
}

func (c *cache) get(path, kind string, read func(string) (any, error)) (any, error) {
	st, err := StampOf(path)
	key := fileKey{path, kind}
	if err != nil {
		c.mu.Lock()
		delete(c.byKey, key)
		c.mu.Unlock()
		return nil, err
	}
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
