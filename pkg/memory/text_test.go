package memory

import (
	"strings"
	"testing"
	"unicode"
)

// tokenizeByFields is Tokenize as first written, SQLite's unicode61 in
// two lines: what Terms must yield.
func tokenizeByFields(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// FuzzTerms: Terms yields the terms tokenizeByFields makes, in order, and
// stops when told.
func FuzzTerms(f *testing.F) {
	for _, s := range []string{"", "tile by 32, then unroll", "Tile_BY 32\tTHEN", "İstanbul ǅemal ⅠⅡ Ⓐ x²", "\xff\xfeab\xc3", "MPI_Allreduce(buf,  n)", "日本語 テキスト ١٢٣", "K\u212aelvin"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := tokenizeByFields(s)
		var got []string
		for term := range Terms(s) {
			got = append(got, term)
		}
		if strings.Join(got, "\x00") != strings.Join(want, "\x00") || len(got) != len(want) {
			t.Fatalf("%q: Terms %q, want %q", s, got, want)
		}
		if len(want) > 1 {
			n := 0
			for range Terms(s) {
				n++
				break
			}
			if n != 1 {
				t.Fatalf("%q: Terms went on after a break", s)
			}
		}
	})
}

// FuzzCountTerms: counting the terms of a text gives as many as Tokenize
// makes (the archival row's length is the index's).
func FuzzCountTerms(f *testing.F) {
	for _, s := range []string{"", "tile by 32, then unroll", "İstanbul ǅemal ⅠⅡ Ⓐ x²", "\xff\xfeab\xc3", "MPI_Allreduce(buf,  n)", "日本語 テキスト ١٢٣"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := CountTerms(s), len(tokenizeByFields(s)); got != want {
			t.Fatalf("%q: CountTerms %d, Tokenize %d terms", s, got, want)
		}
	})
}
