package jsonw

import (
	"encoding/json"
	"strings"
	"testing"
)

// marshal is what encoding/json writes for s.
func marshal(t testing.TB, s string) string {
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(want)
}

// TestAppendStringAsMarshal: every byte value, at every place of a word
// (the scan reads eight at a time), and the cases encoding/json treats
// apart, give json.Marshal's bytes.
func TestAppendStringAsMarshal(t *testing.T) {
	cases := []string{
		"", "a", "plain text of more than eight bytes",
		`quote " and backslash \ and slash /`,
		"tab\tnew\nline\rcr\bbs\fff\x00nul\x1fus\x7fdel",
		"<script>&amp;</script>", "line\u2028para\u2029end", "é ü 日本 🚀",
		"bad \xff byte", "cut \xe6\x97 short", "\xed\xa0\x80 surrogate", "\xc0\x80 overlong",
		strings.Repeat("0123456789", 100) + "\n",
	}
	for c := range 256 {
		for at := range 17 {
			cases = append(cases, strings.Repeat("x", at)+string([]byte{byte(c)})+strings.Repeat("y", 16-at))
		}
	}
	for _, s := range cases {
		if got, want := string(AppendString(nil, s)), marshal(t, s); got != want {
			t.Fatalf("%q: got %s, json.Marshal %s", s, got, want)
		}
	}
	if got := string(AppendString([]byte("prefix:"), "v")); got != `prefix:"v"` {
		t.Fatalf("appended to a prefix: %s", got)
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "hello", "a\"b\\c\n", "<>&", "\u2028\u2029", "\xff\xfe", "日本語テキスト", "0123456789abcdef\x01"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := string(AppendString(nil, s)), marshal(t, s); got != want {
			t.Fatalf("%q: got %s, json.Marshal %s", s, got, want)
		}
	})
}

// BenchmarkAppendString: a prompt's text (lines of about 70 bytes of
// ASCII, some quotes) against json.Marshal.
func BenchmarkAppendString(b *testing.B) {
	line := `for (int i = 0; i < n; i++) { sum += a[i] * b[i]; } // "dot" product`
	s := strings.Repeat(line+"\n", 300)
	b.Run("jsonw", func(b *testing.B) {
		b.SetBytes(int64(len(s)))
		buf := make([]byte, 0, 2*len(s))
		for b.Loop() {
			buf = AppendString(buf[:0], s)
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.SetBytes(int64(len(s)))
		for b.Loop() {
			if _, err := json.Marshal(s); err != nil {
				b.Fatal(err)
			}
		}
	})
}
