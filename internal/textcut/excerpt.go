package textcut

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Ellipsis marks where an excerpt was cut.
const Ellipsis = "..."

// Every excerpt below keeps at most n bytes of s, cut between runes, and
// is valid UTF-8 whatever s holds: a byte that is no character (a
// program's binary output, a cut it made) becomes U+FFFD.

// Head is s's first n bytes, Ellipsis after a cut.
func Head(s string, n int) string {
	if len(s) <= n {
		return valid(s)
	}
	return valid(s[:Floor(s, n)]) + Ellipsis
}

// Tail is s's last n bytes, Ellipsis before a cut.
func Tail(s string, n int) string {
	if len(s) <= n {
		return valid(s)
	}
	return Ellipsis + valid(s[Ceil(s, len(s)-max(n, 0)):])
}

// TailLines is s's last n bytes from the start of a line when one starts
// within them (a log's tail), Ellipsis and a newline before a cut.
func TailLines(s string, n int) string {
	if len(s) <= n {
		return valid(s)
	}
	s = s[Ceil(s, len(s)-max(n, 0)):]
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
		s = s[i+1:]
	}
	return Ellipsis + "\n" + valid(s)
}

// FirstLine is the first line of s, spaces around it trimmed, cut to n
// bytes (n <= 0: not cut), Ellipsis after a cut.
func FirstLine(s string, n int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	s = strings.TrimRightFunc(s, unicode.IsSpace)
	if n > 0 && len(s) > n {
		return valid(s[:Floor(s, n)]) + Ellipsis
	}
	return valid(s)
}

// OneLine is s on one line, its words a space apart (Unicode spaces), cut
// to n bytes, Ellipsis after a cut.
func OneLine(s string, n int) string { return string(AppendOneLine(nil, s, n)) }

// AppendOneLine appends OneLine(s, n) to dst, reading no further into s
// than the cut: a payload may be long and only its first n bytes shown.
func AppendOneLine(dst []byte, s string, n int) []byte {
	start := len(dst)
	for i := 0; i < len(s) && len(dst)-start <= n; {
		// Skip the spaces before a word (as strings.Fields: Unicode spaces,
		// an invalid byte is not one).
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		if unicode.IsSpace(r) {
			i += size
			continue
		}
		w := i
		for i < len(s) {
			r, size = rune(s[i]), 1
			if r >= utf8.RuneSelf {
				r, size = utf8.DecodeRuneInString(s[i:])
			}
			if unicode.IsSpace(r) {
				break
			}
			i += size
		}
		if len(dst) > start {
			dst = append(dst, ' ')
		}
		dst = append(dst, s[w:i]...)
	}
	if out := dst[start:]; len(out) > n {
		dst = append(dst[:start+Floor(out, n)], Ellipsis...)
	}
	if !utf8.Valid(dst[start:]) {
		dst = append(dst[:start], valid(string(dst[start:]))...)
	}
	return dst
}

// Marked is s cut to n bytes, a line saying how much was kept included:
// for text a reader must know was cut (a prompt's section, the notes).
func Marked(s string, n int) string {
	if len(s) <= n {
		return valid(s)
	}
	marker := fmt.Sprintf("\n[... cut to %d of %d chars ...]", n, len(s))
	return valid(s[:Floor(s, n-len(marker))]) + marker
}

// valid is s with every byte that is no character replaced by U+FFFD.
func valid(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
