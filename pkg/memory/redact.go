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
	// password=..., api_key="..." (the name stays, the value goes)
	{nameTriggers, regexp.MustCompile(`(?i)\b((?:` + secretNames + `)\s*=\s*)("[^"]*"|'[^']*'|[^\s,;&]+)`), "${1}" + Redacted},
	// "token": "...", password: ... (YAML, JSON); with ':' prose is common
	// ("the secret: tiling"), so the value must look like a credential: 8
	// characters or more without spaces, or a quoted string.
	{nameTriggers, regexp.MustCompile(`(?i)\b((?:` + secretNames + `)"?\s*:\s*)("[^"]{4,}"|'[^']{4,}'|[^\s,;&"']{8,})`), "${1}" + Redacted},
	// Credentials in URLs: scheme://user:password@host
	{[]string{"://"}, regexp.MustCompile(`([a-z][a-z0-9+.-]*://[^/\s:@]+:)[^@\s/]+@`), "${1}" + Redacted + "@"},
}

const secretNames = `password|passwd|pwd|passphrase|token|access_token|refresh_token|secret|client_secret|api_key|apikey`

var nameTriggers = []string{"passw", "pwd", "passphrase", "token", "secret", "api_key", "apikey"}

// Redact replaces secrets in text: private key blocks, OpenAI, AWS, GitHub
// and Slack tokens, bearer tokens, password=/token=/secret=/api_key= values
// and passwords in URLs.
func Redact(text string) string {
	lower := strings.ToLower(text)
	for _, p := range secretPatterns {
		for _, t := range p.triggers {
			if strings.Contains(lower, t) {
				text = p.re.ReplaceAllString(text, p.repl)
				lower = strings.ToLower(text)
				break
			}
		}
	}
	return text
}
