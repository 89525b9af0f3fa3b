package memory

import (
	"regexp"
	"strings"
)

// Redacted replaces every secret Redact finds.
const Redacted = "[REDACTED]"

// secretPatterns: each runs only when one of its triggers (lower case)
// occurs in the text, so that text without secrets costs one lower-casing
// and a few substring searches, not a dozen regular expressions.
var secretPatterns = []struct {
	triggers []string
	re       *regexp.Regexp
	repl     string
}{
	// PEM private key blocks, whatever the key type.
	{[]string{"private key"}, regexp.MustCompile(`(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?-----END [A-Z0-9 ]*PRIVATE KEY-----`), Redacted},
	// OpenAI-style keys: sk-..., sk-proj-...
	{[]string{"sk-"}, regexp.MustCompile(`\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{16,}`), Redacted},
	// AWS access key ids and secrets.
	{[]string{"akia", "asia"}, regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`), Redacted},
	{[]string{"aws_secret_access_key"}, regexp.MustCompile(`(?i)(aws_secret_access_key\s*[=:]\s*)["']?[A-Za-z0-9/+=]{30,}["']?`), "${1}" + Redacted},
	// GitHub and Slack tokens.
	{[]string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"}, regexp.MustCompile(`\b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{20,}`), Redacted},
	{[]string{"xox"}, regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,}`), Redacted},
	// Authorization: Bearer <token>
	{[]string{"bearer"}, regexp.MustCompile(`(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}`), "${1}" + Redacted},
	// password=..., api_key="..." (the name stays, the value goes; what
	// follows a quoted value up to a separator is part of it, as in a shell
	// word: redacting it again changes nothing)
	{nameTriggers, regexp.MustCompile(`(?i)\b((?:` + secretNames + `)\s*=\s*)(?:"[^"]*"|'[^']*'|[^\s,;&])[^\s,;&]*`), "${1}" + Redacted},
	// "token": "...", password: ... (YAML, JSON); with ':' prose is common
	// ("the secret: tiling"), so the value must look like a credential: 8
	// characters or more without spaces, or a quoted string.
	{nameTriggers, regexp.MustCompile(`(?i)\b((?:` + secretNames + `)"?\s*:\s*)(?:(?:"[^"]{4,}"|'[^']{4,}')[^\s,;&"']*|[^\s,;&"']{8,})`), "${1}" + Redacted},
	// Credentials in URLs: scheme://user:password@host
	{[]string{"://"}, regexp.MustCompile(`([a-z][a-z0-9+.-]*://[^/\s:@]+:)[^@\s/]+@`), "${1}" + Redacted + "@"},
}

const secretNames = `password|passwd|pwd|passphrase|token|access_token|refresh_token|secret|client_secret|api_key|apikey`

var nameTriggers = []string{"passw", "pwd", "passphrase", "token", "secret", "api_key", "apikey"}

// Redact replaces secrets in text: private key blocks, OpenAI, AWS, GitHub
// and Slack tokens, bearer tokens, password=/token=/secret=/api_key= values
// and passwords in URLs.
func Redact(text string) string {
	mask := triggeredBy(text)
	for i, p := range secretPatterns {
		if mask&(1<<i) != 0 {
			text = p.re.ReplaceAllString(text, p.repl)
		}
	}
	return text
}

// triggeredBy has bit i set when a trigger of secretPatterns[i] occurs in
// text, in any case: what strings.Contains(strings.ToLower(text), t) says,
// in one pass over text with no copy. (A pattern's trigger is a part of
// every match, and a replacement adds none, so the triggers of the text as
// given choose the same patterns as those of the text as it is replaced.)
func triggeredBy(text string) uint64 {
	if strings.Contains(text, "\u212a") {
		// KELVIN SIGN is the one character that lower-cases to ASCII.
		return triggeredByLower(strings.ToLower(text))
	}
	var mask uint64
	for i := 0; i < len(text); i++ {
		if !startsTrigger[text[i]] || i+1 < len(text) && !triggerPairs[lowerASCII(text[i])][lowerASCII(text[i+1])] {
			continue // most bytes: a look in a 256-byte table, then in a table of the triggers' first two bytes
		}
		for _, t := range triggersByFirst[lowerASCII(text[i])] {
			if mask&(1<<t.pattern) == 0 && hasPrefixFold(text[i:], t.word) {
				mask |= 1 << t.pattern
			}
		}
	}
	return mask
}

func triggeredByLower(lower string) uint64 {
	var mask uint64
	for i, p := range secretPatterns {
		for _, t := range p.triggers {
			if strings.Contains(lower, t) {
				mask |= 1 << i
				break
			}
		}
	}
	return mask
}

type trigger struct {
	word    string
	pattern int
}

// triggersByFirst: the triggers by their first byte.
var triggersByFirst = func() (ix [256][]trigger) {
	if len(secretPatterns) > 64 {
		panic("redact: more than 64 patterns")
	}
	for i, p := range secretPatterns {
		for _, t := range p.triggers {
			ix[t[0]] = append(ix[t[0]], trigger{t, i})
		}
	}
	return ix
}()

// startsTrigger: a trigger starts with the byte, in either case.
var startsTrigger = func() (t [256]bool) {
	for c := range t {
		t[c] = len(triggersByFirst[lowerASCII(byte(c))]) > 0
	}
	return t
}()

// triggerPairs: a trigger starts with the two (lower-cased) bytes.
var triggerPairs = func() (t *[256][256]bool) {
	t = new([256][256]bool)
	for _, p := range secretPatterns {
		for _, w := range p.triggers {
			if len(w) < 2 {
				panic("redact: a trigger shorter than two bytes")
			}
			t[w[0]][w[1]] = true
		}
	}
	return t
}()

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// hasPrefixFold: s starts with the lower-case ASCII word, in any case.
func hasPrefixFold(s, word string) bool {
	if len(s) < len(word) {
		return false
	}
	for j := 0; j < len(word); j++ {
		if lowerASCII(s[j]) != word[j] {
			return false
		}
	}
	return true
}
