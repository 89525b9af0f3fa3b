package jsonw

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// marshal is what encoding/json writes for s.
func marshal(t testing.TB, v any) string {
	want, err := json.Marshal(v)
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

// TestAppendTimeAndFloatAsMarshal: a time and a float are json.Marshal's
// bytes when ok; not ok (nothing appended) exactly for what json.Marshal
// refuses or writes with an exponent.
func TestAppendTimeAndFloatAsMarshal(t *testing.T) {
	at := time.Date(2026, 11, 24, 20, 1, 2, 345678900, time.UTC)
	for _, tm := range []time.Time{at, {}, at.In(time.FixedZone("x", -5*3600+30*60)), time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), at.In(time.FixedZone("far", 25*3600))} {
		want, err := json.Marshal(tm)
		got, ok := AppendTime([]byte("kept"), tm)
		if ok != (err == nil) || ok && string(got) != "kept"+string(want) || !ok && string(got) != "kept" {
			t.Fatalf("%v: got %s ok=%v, json.Marshal %s (%v)", tm, got, ok, want, err)
		}
	}
	for _, f := range []float64{0, math.Copysign(0, -1), 0.125, -3, 1e-6, 1e20, 123456789.5, 1e-7, 1e21, math.NaN(), math.Inf(-1)} {
		want, err := json.Marshal(f)
		plain := err == nil && !strings.ContainsAny(string(want), "e")
		got, ok := AppendFloat([]byte("kept"), f)
		if ok != plain || ok && string(got) != "kept"+string(want) || !ok && string(got) != "kept" {
			t.Fatalf("%v: got %s ok=%v, json.Marshal %s (%v)", f, got, ok, want, err)
		}
	}
}

// FuzzAppendStrings: a list of strings is json.Marshal's bytes.
func FuzzAppendStrings(f *testing.F) {
	f.Add("", "", 0)
	f.Add("stage:improve", "<&>\"\xff", 2)
	f.Add("SUCCESS", "", 1)
	f.Fuzz(func(t *testing.T, a, b string, n int) {
		var ss []string // nil for n < 0: "null"
		if n >= 0 {
			ss = []string{}
			for i := range n % 4 {
				ss = append(ss, []string{a, b}[i%2])
			}
		}
		if got, want := string(AppendStrings([]byte("x"), ss)), "x"+marshal(t, ss); got != want {
			t.Fatalf("%q: got %s, json.Marshal %s", ss, got, want)
		}
	})
}
