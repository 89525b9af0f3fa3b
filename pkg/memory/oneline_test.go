package memory

import (
	"strings"
	"testing"

	"github.com/hpcq/hpcq/internal/textcut"
)

// oneLineByFields is oneLine as first written: every word of s, then cut.
func oneLineByFields(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:textcut.Floor(s, n)] + "..."
	}
	return s
}

// FuzzOneLine: oneLine, which stops reading at the cut, is what joining
// every word and cutting the result gives (Unicode spaces, invalid UTF-8,
// cuts inside a character included).
func FuzzOneLine(f *testing.F) {
	for _, s := range []string{"", " ", "a", "  a  b\tc\n", "héllo wörld", "a\u00a0b\u2003c\u0085d", "\xff\xfe x \xc3", "日本語のテキスト", strings.Repeat("word ", 200)} {
		for _, n := range []int{0, 1, 2, 3, 5, 8, 40, 600} {
			f.Add(s, n)
		}
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 10_000 {
			return
		}
		want := oneLineByFields(s, n)
		if got := oneLine(s, n); got != want {
			t.Fatalf("oneLine(%q, %d) = %q, want %q", s, n, got, want)
		}
		if got := string(appendOneLine([]byte("prefix "), s, n)); got != "prefix "+want {
			t.Fatalf("appendOneLine after a prefix = %q, want %q", got, "prefix "+want)
		}
	})
}
