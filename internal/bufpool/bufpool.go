// Package bufpool lends byte slices for the records hpcq builds whole and
// then writes at once, several per node (a prompt log's entries, Phase 0's
// record): a node's prompts carry its code, output and memory, and
// building each record in a fresh buffer made more garbage than the rest
// of writing it.
package bufpool

import "sync"

// Max is the largest buffer kept for reuse: a larger one, grown for an
// exceptional record, is left to the collector.
const Max = 1 << 20

var pool = sync.Pool{New: func() any { return new([]byte) }}

// Get lends a buffer of length 0.
func Get() *[]byte {
	b := pool.Get().(*[]byte)
	*b = (*b)[:0]
	return b
}

// Put gives b back; the caller no longer uses it, nor any slice of it.
func Put(b *[]byte) {
	if cap(*b) <= Max {
		pool.Put(b)
	}
}
