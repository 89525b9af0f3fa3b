package tests

import (
	"bytes"
	"regexp"
	"sync"
)

type syncWriter struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func regexpMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }
