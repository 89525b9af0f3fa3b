package memory

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hpcq/hpcq/internal/bufpool"
)

// NormalizeFact is the text a fact hash is taken of: lower case, runs of
// white space collapsed to one space, trimmed.
func NormalizeFact(text string) string {
	return string(appendFact(nil, text))
}

// appendFact appends NormalizeFact(text) to dst. ASCII, most of a node's
// texts (its code, its output), is lowered and its spaces told a byte at a
// time.
func appendFact(dst []byte, text string) []byte {
	text = strings.TrimSpace(text)
	dst = slices.Grow(dst, len(text))
	start, space := len(dst), false
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			i++
			if asciiSpace[c] {
				space = true
				continue
			}
			if space && len(dst) > start {
				dst = append(dst, ' ')
			}
			space = false
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			dst = append(dst, c)
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		i += size
		if unicode.IsSpace(r) {
			space = true
			continue
		}
		if space && len(dst) > start {
			dst = append(dst, ' ')
		}
		space = false
		dst = utf8.AppendRune(dst, unicode.ToLower(r))
	}
	return dst
}

// asciiSpace: the ASCII bytes unicode.IsSpace says are space.
var asciiSpace = [utf8.RuneSelf]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true}

// FactHash is sha256 of the normalized text, hex.
func FactHash(text string) string {
	buf := bufpool.Get()
	*buf = appendFact(*buf, text)
	h := sha256.Sum256(*buf)
	bufpool.Put(buf)
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
	// DefaultHalfLife: a fact last seen this long ago has half its
	// confidence left (memory.decay_half_life_hours, default 24).
	DefaultHalfLife = 24 * time.Hour
	recencyWeight   = 0.3
	frequencyWeight = 0.2
	// priorConfidence is the confidence one observation gives a fact.
	priorConfidence = 0.5
)

// Confidence of a fact observed count times (seed 004: repeats raise it):
// each observation is independent evidence with the prior's weight, so
// 1 - (1-0.5)^count: 0.5, 0.75, 0.875, ...
func Confidence(count int) float64 {
	return 1 - math.Pow(1-priorConfidence, float64(max(count, 1)))
}

// Decay is what is left after age at the half-life: 2^(-age/halfLife), 1
// for age <= 0; halfLife <= 0 takes DefaultHalfLife.
func Decay(age, halfLife time.Duration) float64 {
	if halfLife <= 0 {
		halfLife = DefaultHalfLife
	}
	if age < 0 {
		age = 0
	}
	return math.Exp2(-float64(age) / float64(halfLife))
}

// Strength is a fact's confidence times its decay now (seed 004's
// "confidence x decay"): what ranking and forgetting use.
func Strength(count int, lastSeen, now time.Time, halfLife time.Duration) float64 {
	return Confidence(count) * Decay(now.Sub(lastSeen), halfLife)
}

// Rank is the final score of an archival hit:
//
//	score     = relevance * (1 + 0.3*strength + 0.2*frequency)
//	relevance = bm25 (higher is better; SQLite's bm25() is negated)
//	strength  = confidence * decay: (1 - 0.5^count) * 2^(-age/halfLife),
//	            age = now - last seen
//	frequency = log(1 + count) / log(1 + 16), capped at 1
//
// Relevance dominates: strength and frequency can raise a hit by at most
// 50%, which reorders close matches but never lifts an unrelated text.
func Rank(bm25 float64, lastSeen time.Time, count int, now time.Time, halfLife time.Duration) float64 {
	frequency := math.Min(1, math.Log1p(float64(count))/math.Log1p(16))
	return bm25 * (1 + recencyWeight*Strength(count, lastSeen, now, halfLife) + frequencyWeight*frequency)
}
