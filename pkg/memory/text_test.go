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

// normalizeFactByRunes is NormalizeFact as first written, rune by rune.
func normalizeFactByRunes(text string) string {
	var b strings.Builder
	space := false
	for _, r := range strings.TrimSpace(text) {
		if unicode.IsSpace(r) {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// FuzzNormalizeFact: the normalized text is what the rune-by-rune rule
// makes, so that fact hashes stay those of texts stored before.
func FuzzNormalizeFact(f *testing.F) {
	for _, s := range []string{"", "  Tile BY 32\t\n then\u00a0unroll ", "İstanbul\u2028ǅ\u0085x", "\xff\xfe a \xc3", "#pragma omp parallel for\r\n\tfor (i = 0; i < N; i++)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := NormalizeFact(s), normalizeFactByRunes(s); got != want {
			t.Fatalf("%q: NormalizeFact %q, want %q", s, got, want)
		}
	})
}
