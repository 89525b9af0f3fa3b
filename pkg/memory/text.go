package memory

import (
	"math"
	"strings"
	"unicode"
)

// Tokenize splits text into search terms the way SQLite's unicode61
// tokenizer does: lower-cased runs of letters and digits. Every backend
// indexes and queries with it, so their rankings agree.
func Tokenize(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// QueryTerms are the distinct terms of a query, in order of first use.
func QueryTerms(query string) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range Tokenize(query) {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// BM25 parameters (the values SQLite's bm25() uses).
const (
	BM25K1 = 1.2
	BM25B  = 0.75
)

// BM25IDF is the inverse document frequency of a term found in df of the
// n visible documents (the Lucene form, never negative).
func BM25IDF(n, df int) float64 {
	return math.Log(1 + (float64(n)-float64(df)+0.5)/(float64(df)+0.5))
}

// BM25Term is one term's contribution to a document's BM25 score: tf
// occurrences in a document of docLen terms, avgLen the visible average.
func BM25Term(idf float64, tf, docLen int, avgLen float64) float64 {
	f := float64(tf)
	return idf * f * (BM25K1 + 1) / (f + BM25K1*(1-BM25B+BM25B*float64(docLen)/avgLen))
}
