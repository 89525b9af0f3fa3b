package memory

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRedact(t *testing.T) {
	cases := map[string]string{
		"key sk-proj-abcdefghijklmnopqrstuvwxyz123456 in text":                                      "key [REDACTED] in text",
		"OPENAI_API_KEY=sk-abcdefghijklmnopqrstuv":                                                  "OPENAI_API_KEY=[REDACTED]",
		"aws AKIAIOSFODNN7EXAMPLE id":                                                               "aws [REDACTED] id",
		"aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY":                          "aws_secret_access_key = [REDACTED]",
		"Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig":                                    "Authorization: Bearer [REDACTED]",
		`password="hunter2 with spaces" user=bob`:                                                   `password=[REDACTED] user=bob`,
		"nats://hpcq:s3cret@nats.example.org:4222":                                                  "nats://hpcq:[REDACTED]@nats.example.org:4222",
		"ghp_abcdefghijklmnopqrstuvwxyz0123":                                                        "[REDACTED]",
		"-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\nBBBB\n-----END OPENSSH PRIVATE KEY-----\nafter": "[REDACTED]\nafter",
		"nothing secret: tile size 32, -O3 -fopenmp":                                                "nothing secret: tile size 32, -O3 -fopenmp",
	}
	for in, want := range cases {
		require.Equal(t, want, Redact(in), in)
	}
	require.False(t, strings.Contains(Redact("api_key='k-123456'"), "k-123456"))
}

// FuzzRedact: redaction never panics, is idempotent, and leaves no
// OpenAI-style key behind.
func FuzzRedact(f *testing.F) {
	for _, s := range []string{"sk-abcdefghijklmnopqrstu", "password=x", "Bearer abcdefghij", "nats://u:p@h", "plain text"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r := Redact(s)
		if Redact(r) != r {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, r, Redact(r))
		}
	})
}
