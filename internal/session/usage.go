package session

import (
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/hpcq/hpcq/internal/fileio"
	"github.com/hpcq/hpcq/pkg/llm"
)

// usageSaver keeps the run's usage (tokens and cost, what the budget
// counts on a resume) in usage.json: after each node, at most once per
// usageEvery (each save replaces the file: half a millisecond on ext4, the
// largest file cost of a node), and at the run's end. A crash loses at
// most the last usageEvery of usage; the llm_calls rows keep every call.
type usageSaver struct {
	path  string
	usage func() llm.Usage
	log   *slog.Logger

	mu      sync.Mutex
	last    time.Time
	pending *time.Timer
}

const usageEvery = time.Second

// save writes the usage now, or once usageEvery has passed since the last write.
func (s *usageSaver) save() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending != nil {
		return
	}
	if wait := usageEvery - time.Since(s.last); wait > 0 {
		s.pending = time.AfterFunc(wait, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.pending != nil {
				s.pending = nil
				s.write()
			}
		})
		return
	}
	s.write()
}

// flush writes the usage now and drops a pending write.
func (s *usageSaver) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending != nil {
		s.pending.Stop()
		s.pending = nil
	}
	s.write()
}

// write saves the usage; the caller holds mu.
func (s *usageSaver) write() {
	s.last = time.Now()
	data, err := json.Marshal(s.usage())
	if err == nil {
		err = fileio.WriteFileAtomic(s.path, data)
	}
	if err != nil {
		s.log.Warn("usage not saved", "err", err)
	}
}
