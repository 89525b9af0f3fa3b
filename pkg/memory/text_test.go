package memory

import "testing"

// FuzzCountTerms: counting the terms of a text gives as many as Tokenize
// makes (the archival row's length is the index's).
func FuzzCountTerms(f *testing.F) {
	for _, s := range []string{"", "tile by 32, then unroll", "İstanbul ǅemal ⅠⅡ Ⓐ x²", "\xff\xfeab\xc3", "MPI_Allreduce(buf,  n)", "日本語 テキスト ١٢٣"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := CountTerms(s), len(Tokenize(s)); got != want {
			t.Fatalf("%q: CountTerms %d, Tokenize %d terms", s, got, want)
		}
	})
}
