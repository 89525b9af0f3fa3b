package term

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// TestVisible: what a hostile program prints to drive a terminal is shown,
// not acted on: OSC 52 (the clipboard), OSC 0 (the title), CSI 2J (clear),
// a bare CR, an 8-bit CSI (as a C1 character and as a lone byte), a
// right-to-left override; text, newlines and tabs stay.
func TestVisible(t *testing.T) {
	for in, want := range map[string]string{
		"plain text\n\tindented": "plain text\n\tindented",
		"\x1b]52;c;aGVsbG8=\x07": "^[]52;c;aGVsbG8=^G",
		"\x1b]0;pwned\x1b\\":     "^[]0;pwned^[\\",
		"\x1b[2J\x1b[H":          "^[[2J^[[H",
		"ok\rFAILED":             "ok^MFAILED",
		"c1 \u009b2J":            "c1 <U+009B>2J",
		"byte \x9b2J":            `byte <\x9b>2J`,
		"evil\u202eexe.txt":      "evil<U+202E>exe.txt",
		"GFLOP/s é 10³ 🚀":        "GFLOP/s é 10³ 🚀",
		"del\x7f nul\x00":        "del^? nul^@",
	} {
		require.Equal(t, want, Visible(in), "%q", in)
	}
}

// TestVisibleWriter: a character cut between two writes is written whole;
// one cut at the end is written on Close as bytes.
func TestVisibleWriter(t *testing.T) {
	var b bytes.Buffer
	w := VisibleWriter(&b)
	s := "é\x1b[2J🚀"
	for i := 0; i < len(s); i++ {
		n, err := w.Write([]byte{s[i]})
		require.NoError(t, err)
		require.Equal(t, 1, n)
	}
	require.NoError(t, w.Close())
	require.Equal(t, "é^[[2J🚀", b.String())
	b.Reset()
	_, _ = w.Write([]byte("x\xf0\x9f"))
	require.Equal(t, "x", b.String())
	require.NoError(t, w.Close())
	require.Equal(t, `x<\xf0><\x9f>`, b.String())
}

// FuzzVisible: whatever a program prints, what reaches the terminal is
// valid UTF-8 with no control but newline and tab, and no bidirectional
// control; written in pieces, it is the same as written whole.
func FuzzVisible(f *testing.F) {
	f.Add([]byte("\x1b]52;c;aGVsbG8=\x07"), 3)
	f.Add([]byte("é\u202e\x9b\r"), 1)
	f.Fuzz(func(t *testing.T, in []byte, cut int) {
		out := Visible(string(in))
		require.True(t, utf8.ValidString(out))
		for _, r := range out {
			require.False(t, r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || r >= 0x80 && r <= 0x9f || bidi(r), "%q in %q", r, out)
		}
		if plain(string(in)) {
			require.Equal(t, string(in), out)
		}
		var b bytes.Buffer
		w := VisibleWriter(&b)
		if cut < 0 {
			cut = -cut
		}
		cut = cut % (len(in) + 1)
		_, _ = w.Write(in[:cut])
		_, _ = w.Write(in[cut:])
		require.NoError(t, w.Close())
		require.Equal(t, out, b.String())
		require.False(t, strings.ContainsRune(b.String(), 0x1b))
	})
}
