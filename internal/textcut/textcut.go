// Package textcut finds where UTF-8 text may be cut: at the start of a
// rune, never inside one. Every bounded excerpt hpcq makes (prompts, memory
// renders, error messages, archived code) cuts through here.
package textcut

import "unicode/utf8"

// Floor is the largest cut point of s at or before n: s[:Floor(s, n)] is
// s's longest prefix of at most n bytes that ends between runes. n is
// clamped to [0, len(s)].
func Floor[T ~string | ~[]byte](s T, n int) int {
	if n >= len(s) {
		return len(s)
	}
	n = max(n, 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// Ceil is the smallest cut point of s at or after n: s[Ceil(s, n):] is
// s's longest suffix starting at or after n that starts between runes. n is
// clamped to [0, len(s)].
func Ceil[T ~string | ~[]byte](s T, n int) int {
	n = max(n, 0)
	for n < len(s) && !utf8.RuneStart(s[n]) {
		n++
	}
	return min(n, len(s))
}
