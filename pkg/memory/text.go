package memory

import (
	"iter"
	"math"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Tokenize splits text into search terms the way SQLite's unicode61
// tokenizer does: lower-cased runs of letters and digits. Every backend
// indexes and queries with it, so their rankings agree.
func Tokenize(text string) []string {
	return slices.Collect(Terms(text))
}

// Terms yields the terms of text as Tokenize makes them, in order, without
// making the list: each is a part of text (or of one lower-cased copy of
// it) that the caller copies to keep. Text in ASCII, such as code, is
// split a byte at a time; other text as strings.ToLower and unicode's
// letters and digits say.
func Terms(text string) iter.Seq[string] {
	return func(yield func(string) bool) {
		ascii, upper := true, false
		for i := 0; i < len(text); i++ {
			c := text[i]
			ascii = ascii && c < utf8.RuneSelf
			upper = upper || 'A' <= c && c <= 'Z'
		}
		if !ascii {
			for _, t := range strings.FieldsFunc(strings.ToLower(text), notTermRune) {
				if !yield(t) {
					return
				}
			}
			return
		}
		if upper {
			text = strings.ToLower(text)
		}
		for i := 0; i < len(text); {
			if !asciiTerm[text[i]] {
				i++
				continue
			}
			j := i + 1
			for j < len(text) && asciiTerm[text[j]] {
				j++
			}
			if !yield(text[i:j]) {
				return
			}
			i = j
		}
	}
}

func notTermRune(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }

// asciiTerm: the ASCII letters and digits.
var asciiTerm = func() (t [256]bool) {
	for c := range t {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
	}
	return t
}()

// CountTerms is len(Tokenize(text)), counted without making the terms.
func CountTerms(text string) int {
	n, in := 0, false
	for _, r := range text {
		// strings.ToLower maps each rune with unicode.ToLower.
		r = unicode.ToLower(r)
		term := unicode.IsLetter(r) || unicode.IsDigit(r)
		if term && !in {
			n++
		}
		in = term
	}
	return n
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

// BM25Rank ranks a whole visible set of texts against a query: the
// indexes of the best n texts that contain a query term, best first (ties:
// the larger seq first), with their scores. Backends that fetch the
// visible set (rather than keep an index of it) rank with it.
func BM25Rank(texts []string, seqs []int64, query string, n int) ([]int, []float64) {
	terms := QueryTerms(query)
	if len(terms) == 0 || len(texts) == 0 {
		return nil, nil
	}
	want := map[string]int{}
	for i, t := range terms {
		want[t] = i
	}
	tfs := make([][]int, len(texts))
	lens := make([]int, len(texts))
	df := make([]int, len(terms))
	total := 0
	for i, text := range texts {
		toks := Tokenize(text)
		lens[i] = len(toks)
		total += len(toks)
		var tf []int
		for _, tok := range toks {
			if j, ok := want[tok]; ok {
				if tf == nil {
					tf = make([]int, len(terms))
				}
				if tf[j] == 0 {
					df[j]++
				}
				tf[j]++
			}
		}
		tfs[i] = tf
	}
	avg := float64(total) / float64(len(texts))
	idf := make([]float64, len(terms))
	for j := range terms {
		idf[j] = BM25IDF(len(texts), df[j])
	}
	var idx []int
	var scores []float64
	for i, tf := range tfs {
		if tf == nil {
			continue
		}
		s := 0.0
		for j, f := range tf {
			if f > 0 {
				s += BM25Term(idf[j], f, lens[i], avg)
			}
		}
		idx = append(idx, i)
		scores = append(scores, s)
	}
	order := make([]int, len(idx))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool {
		x, y := order[a], order[b]
		if scores[x] != scores[y] {
			return scores[x] > scores[y]
		}
		return seqs[idx[x]] > seqs[idx[y]]
	})
	if len(order) > n {
		order = order[:n]
	}
	outIdx := make([]int, len(order))
	outScores := make([]float64, len(order))
	for k, o := range order {
		outIdx[k], outScores[k] = idx[o], scores[o]
	}
	return outIdx, outScores
}

// HasTags reports whether have carries every tag of want (a search's tag
// filter).
func HasTags(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}
