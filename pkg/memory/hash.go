package memory

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"strings"
	"time"
	"unicode"
)

// NormalizeFact is the text a fact hash is taken of: lower case, runs of
// white space collapsed to one space, trimmed.
func NormalizeFact(text string) string {
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

// FactHash is sha256 of the normalized text, hex.
func FactHash(text string) string {
	h := sha256.Sum256([]byte(NormalizeFact(text)))
	return hex.EncodeToString(h[:])
}

// EpisodeHash is sha256 of the fact hash, the branch and the context: the
// same fact met in another branch or context is another episode.
func EpisodeHash(factHash, branch, context string) string {
	h := sha256.Sum256([]byte(factHash + "\x00" + branch + "\x00" + context))
	return hex.EncodeToString(h[:])
}

// Ranking weights of Rank.
const (
	// RecencyHalfLife: an item last seen this long ago gets half the
	// recency boost.
	RecencyHalfLife = 24 * time.Hour
	recencyWeight   = 0.3
	frequencyWeight = 0.2
)

// Rank is the final score of an archival hit:
//
//	score = relevance * (1 + 0.3*recency + 0.2*frequency)
//	relevance = bm25 (higher is better; SQLite's bm25() is negated)
//	recency   = 2^(-age/24h), age = now - last seen, in [0, 1]
//	frequency = log(1 + count) / log(1 + 16), capped at 1
//
// Relevance dominates: recency and frequency can raise a hit by at most
// 50%, which reorders close matches but never lifts an unrelated text.
func Rank(bm25 float64, lastSeen time.Time, count int, now time.Time) float64 {
	age := now.Sub(lastSeen)
	if age < 0 {
		age = 0
	}
	recency := math.Exp2(-float64(age) / float64(RecencyHalfLife))
	frequency := math.Min(1, math.Log1p(float64(count))/math.Log1p(16))
	return bm25 * (1 + recencyWeight*recency + frequencyWeight*frequency)
}
