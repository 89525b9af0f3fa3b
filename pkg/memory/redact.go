package memory

import "regexp"

// Redacted replaces every secret Redact finds.
const Redacted = "[REDACTED]"

var secretPatterns = []struct {
	re   *regexp.Regexp
	repl string
}{
	// PEM private key blocks, whatever the key type.
	{regexp.MustCompile(`(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?-----END [A-Z0-9 ]*PRIVATE KEY-----`), Redacted},
	// OpenAI-style keys: sk-..., sk-proj-...
	{regexp.MustCompile(`\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{16,}`), Redacted},
	// AWS access key ids and secrets.
	{regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`), Redacted},
	{regexp.MustCompile(`(?i)(aws_secret_access_key\s*[=:]\s*)["']?[A-Za-z0-9/+=]{30,}["']?`), "${1}" + Redacted},
	// GitHub and Slack tokens.
	{regexp.MustCompile(`\b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{20,}`), Redacted},
	{regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,}`), Redacted},
	// Authorization: Bearer <token>
	{regexp.MustCompile(`(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}`), "${1}" + Redacted},
	// password=..., api_key="..." (the name stays, the value goes)
	{regexp.MustCompile(`(?i)\b((?:` + secretNames + `)\s*=\s*)("[^"]*"|'[^']*'|[^\s,;&]+)`), "${1}" + Redacted},
	// "token": "...", password: ... (YAML, JSON); with ':' prose is common
	// ("the secret: tiling"), so the value must look like a credential: 8
	// characters or more without spaces, or a quoted string.
	{regexp.MustCompile(`(?i)\b((?:` + secretNames + `)"?\s*:\s*)("[^"]{4,}"|'[^']{4,}'|[^\s,;&"']{8,})`), "${1}" + Redacted},
	// Credentials in URLs: scheme://user:password@host
	{regexp.MustCompile(`([a-z][a-z0-9+.-]*://[^/\s:@]+:)[^@\s/]+@`), "${1}" + Redacted + "@"},
}

const secretNames = `password|passwd|pwd|passphrase|token|access_token|refresh_token|secret|client_secret|api_key|apikey`

// Redact replaces secrets in text: private key blocks, OpenAI, AWS, GitHub
// and Slack tokens, bearer tokens, password=/token=/secret=/api_key= values
// and passwords in URLs.
func Redact(text string) string {
	for _, p := range secretPatterns {
		text = p.re.ReplaceAllString(text, p.repl)
	}
	return text
}
