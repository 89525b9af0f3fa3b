package jsonw

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// marshal is what encoding/json writes for v.
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
	t.Parallel()
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
	t.Parallel()
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

// indentSample has what hpcq's indented files hold: strings to escape,
// numbers either side of the exponent bounds, omitted and nil fields,
// maps, raw JSON, times, a type with its own MarshalJSON, pointers.
type indentSample struct {
	S       string            `json:"s"`
	Opt     string            `json:"opt,omitempty"`
	N       int               `json:"n"`
	F       float64           `json:"f"`
	P       *float64          `json:"p,omitempty"`
	B       bool              `json:"b,omitempty"`
	L       []string          `json:"l"`
	E       []string          `json:"e,omitempty"`
	M       map[string]string `json:"m,omitempty"`
	Raw     json.RawMessage   `json:"raw,omitempty"`
	T       time.Time         `json:"t"`
	D       time.Duration     `json:"d"`
	Nested  *indentSample     `json:"nested,omitempty"`
	Marshal marshaler         `json:"marshal"`
	Bytes   []byte            `json:"bytes,omitempty"`
	Any     any               `json:"any"`
}

type marshaler string

func (m marshaler) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"as": string(m)})
}

// FuzzMarshalIndent: MarshalIndent writes json.MarshalIndent's bytes (for
// valid UTF-8; see below).
func FuzzMarshalIndent(f *testing.F) {
	f.Add("plain", "<script>&\u2028", 3, 1e-7, true, "k", `{"a": [1, 2.5e3, null]}`, int64(1e18), []byte("\x00\xff"))
	f.Add("\xff\xfe", "", -1, 1e21, false, "", "", int64(-1), []byte(nil))
	f.Add("", "x", 0, 0.1, true, "\"q\"", "[]", int64(0), []byte("code"))
	f.Fuzz(func(t *testing.T, s, opt string, n int, x float64, b bool, key, raw string, ns int64, bs []byte) {
		v := indentSample{S: s, Opt: opt, N: n, F: x, B: b, T: time.Unix(0, ns).UTC(), D: time.Duration(ns), Marshal: marshaler(s), Bytes: bs, Any: map[string]any{key: []any{x, s}}}
		if n%2 == 0 {
			v.P, v.L, v.M = &x, []string{s, opt}, map[string]string{key: s, s: opt}
			v.Nested = &indentSample{S: opt, L: []string{}}
		}
		if json.Valid([]byte(raw)) {
			v.Raw = json.RawMessage(raw)
		}
		want, wantErr := json.MarshalIndent(v, "", "  ")
		got, err := MarshalIndent(v)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("error %v; json.MarshalIndent %v", err, wantErr)
		}
		if err != nil || string(got) == string(want) {
			return
		}
		// Invalid UTF-8 is replaced by U+FFFD in both, which encoding/json
		// writes as an escape and MarshalIndent as the character: the same
		// value, other bytes.
		var g, w any
		if utf8.ValidString(s) && utf8.ValidString(opt) && utf8.ValidString(key) || json.Unmarshal(got, &g) != nil || json.Unmarshal(want, &w) != nil || !reflect.DeepEqual(g, w) {
			t.Fatalf("got\n%s\njson.MarshalIndent\n%s", got, want)
		}
	})
}
