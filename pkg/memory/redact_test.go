package memory

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRedact(t *testing.T) {
	t.Parallel()
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
		`password="unterminated value`:                                                              `password=[REDACTED] value`,
		`PASSWORD="x y"z rest`:                                                                      `PASSWORD=[REDACTED] rest`,
		"passwd:'0000'0 rest":                                                                       "passwd:[REDACTED] rest",
		"TO\u212aEN=abcdefgh":                                                                       "TO\u212aEN=[REDACTED]",
	}
	for in, want := range cases {
		require.Equal(t, want, Redact(in), in)
	}
	require.False(t, strings.Contains(Redact("api_key='k-123456'"), "k-123456"))
}

// TestTriggeredBy: every trigger is found at the start, inside and at the
// very end of a text, in any case, as in the lower-cased text.
func TestTriggeredBy(t *testing.T) {
	t.Parallel()
	for _, p := range secretPatterns {
		for _, w := range p.triggers {
			for _, form := range []string{w, strings.ToUpper(w), strings.ToUpper(w[:1]) + w[1:]} {
				for _, text := range []string{form, form + " tail", "head " + form, "x" + form + "y", "é" + form} {
					require.Equal(t, triggeredByLower(strings.ToLower(text)), triggeredBy(text), "%q", text)
					require.NotZero(t, triggeredBy(text), "%q", text)
				}
			}
			require.Equal(t, triggeredByLower(strings.ToLower(w[:len(w)-1])), triggeredBy(w[:len(w)-1]), "a trigger cut short: %q", w[:len(w)-1])
		}
	}
}

// FuzzRedact: redaction never panics, is idempotent, and leaves no
// OpenAI-style key behind.
func FuzzRedact(f *testing.F) {
	for _, s := range []string{"sk-abcdefghijklmnopqrstu", "password=x", "TO\u212aEN=abcdefgh", "PassWord: 'x y z w'", "\xffapi_KEY=1", "Bearer abcdefghij", "nats://u:p@h", "plain text"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r := Redact(s)
		if want := redactEachLowered(s); r != want {
			t.Fatalf("%q: redacted %q, one lower-cased copy per pattern gives %q", s, r, want)
		}
		if Redact(r) != r {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, r, Redact(r))
		}
	})
}

// redactEachLowered is Redact as it was written first: the text lower-cased
// again after each replacement, each trigger looked for in it.
func redactEachLowered(text string) string {
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

// BenchmarkRedact: a prompt of 24 KB with no secret (the common case: every
// message of every prompt log is redacted).
func BenchmarkRedact(b *testing.B) {
	para := "Implement a blocked matrix multiply in C with OpenMP; report GFLOP/s as the metric. " +
		"The previous attempt tiled by 32 and spent most of its time in the packing step, see the profile below.\n" +
		"```c\n#pragma omp parallel for schedule(static)\nfor (int i = 0; i < n; i += BS) { pack(a, i); }\n```\n"
	text := strings.Repeat(para, 24<<10/len(para))
	b.SetBytes(int64(len(text)))
	b.Run("one-pass", func(b *testing.B) {
		for b.Loop() {
			_ = Redact(text)
		}
	})
	b.Run("lower-cased", func(b *testing.B) {
		for b.Loop() {
			_ = redactEachLowered(text)
		}
	})
}
