package textcut

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestExcerpts(t *testing.T) {
	t.Parallel()
	s := "héllo wörld 日本語"
	require.Equal(t, s, Head(s, 100))
	require.Equal(t, "h"+Ellipsis, Head(s, 2), "é is not split")
	require.Equal(t, Ellipsis+"語", Tail(s, 4), "the cut moves forward to a rune start")
	require.Equal(t, Ellipsis+"\nline 3\n", TailLines("line 1\nline 2\nline 3\n", 9))
	require.Equal(t, "first", FirstLine("  first\n", 0))
	require.Equal(t, "first", FirstLine("first\nsecond", 0))
	require.Equal(t, "fir"+Ellipsis, FirstLine("first\nsecond", 3))
	require.Equal(t, "a b c", OneLine(" a\n b\t c ", 10))
	require.Equal(t, "a\uFFFDb", Head("a\xffb", 10), "no invalid byte reaches a reader")
	m := Marked(strings.Repeat("é", 100), 60)
	require.True(t, strings.HasSuffix(m, "\n[... cut to 60 of 200 chars ...]"), m)
	require.True(t, utf8.ValidString(m))
}

// oneLineByFields is OneLine as first written: every word of s, then cut.
func oneLineByFields(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:Floor(s, n)] + Ellipsis
	}
	return valid(s)
}

var fuzzSeeds = []string{"", " ", "a", "  a  b\tc\n", "héllo wörld", "a\u00a0b\u2003c\u0085d", "\xff\xfe x \xc3", "日本語のテキスト",
	"line 1\nline 2\n\xe2\x82", strings.Repeat("word ", 200)}

// FuzzExcerpts: every excerpt is valid UTF-8 whatever the text (invalid
// bytes, cuts inside a character), keeps at most n bytes of it, and of
// valid text is a piece of it; AppendOneLine, which stops reading at the
// cut, is what joining every word and cutting the result gives.
func FuzzExcerpts(f *testing.F) {
	for _, s := range fuzzSeeds {
		for _, n := range []int{0, 1, 2, 3, 5, 8, 40, 600} {
			f.Add(s, n)
		}
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 10_000 {
			return
		}
		for name, got := range map[string]string{"Head": Head(s, n), "Tail": Tail(s, n), "TailLines": TailLines(s, n),
			"FirstLine": FirstLine(s, n), "OneLine": OneLine(s, n), "Marked": Marked(s, n)} {
			if !utf8.ValidString(got) {
				t.Fatalf("%s(%q, %d) = %q: not valid UTF-8", name, s, n, got)
			}
		}
		if utf8.ValidString(s) {
			if h := strings.TrimSuffix(Head(s, n), Ellipsis); !strings.HasPrefix(s, h) || len(h) > n {
				t.Fatalf("Head(%q, %d) = %q", s, n, Head(s, n))
			}
			if tl := strings.TrimPrefix(Tail(s, n), Ellipsis); !strings.HasSuffix(s, tl) || len(tl) > n {
				t.Fatalf("Tail(%q, %d) = %q", s, n, Tail(s, n))
			}
		}
		want := oneLineByFields(s, n)
		if got := OneLine(s, n); got != want {
			t.Fatalf("OneLine(%q, %d) = %q, want %q", s, n, got, want)
		}
		if got := string(AppendOneLine([]byte("prefix "), s, n)); got != "prefix "+want {
			t.Fatalf("AppendOneLine after a prefix = %q, want %q", got, "prefix "+want)
		}
	})
}

// TestMarked: text over its bound keeps its head, cut between
// runes, and says how much it was.
func TestMarked(t *testing.T) {
	if got := Marked("short", 100); got != "short" {
		t.Fatalf("text within the bound changed: %q", got)
	}
	text := strings.Repeat("é", 200) // 400 bytes
	got := Marked(text, 100)
	if len(got) > 100 || !utf8.ValidString(got) || !strings.HasSuffix(got, "[... cut to 100 of 400 chars ...]") {
		t.Fatalf("cut: %d bytes, valid %v: %q", len(got), utf8.ValidString(got), got)
	}
	if got := Marked(text, 5); !strings.HasPrefix(got, "\n[... cut to 5 of 400") {
		t.Fatalf("a bound smaller than the marker keeps no text: %q", got)
	}
}
