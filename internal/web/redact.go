package web

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/hpcq/hpcq/pkg/memory"
)

// redactor removes secrets from every text the server sends: the values it
// was given (an API key, a server's password, its own token) and what
// memory.Redact recognizes (keys, tokens, password= values, passwords in
// URLs).
type redactor struct {
	secrets []string
	repl    *strings.Replacer
}

// minSecret: shorter values are not secrets worth the name, and replacing
// them would mangle ordinary text.
const minSecret = 6

func newRedactor(secrets []string) *redactor {
	r := &redactor{}
	var pairs []string
	seen := map[string]bool{}
	for _, s := range secrets {
		if len(s) < minSecret || seen[s] {
			continue
		}
		seen[s] = true
		r.secrets = append(r.secrets, s)
		pairs = append(pairs, s, memory.Redacted)
	}
	if len(pairs) > 0 {
		r.repl = strings.NewReplacer(pairs...)
	}
	return r
}

// text redacts one text.
func (r *redactor) text(s string) string {
	if r.repl != nil {
		s = r.repl.Replace(s)
	}
	return memory.Redact(s)
}

// json encodes v with every string in it (keys included) redacted. It
// encodes, decodes and encodes again, so that a pattern can never cut
// through the JSON syntax around a value.
func (r *redactor) json(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, err
	}
	return json.Marshal(r.walk(tree))
}

func (r *redactor) walk(v any) any {
	switch t := v.(type) {
	case string:
		return r.text(t)
	case []any:
		for i := range t {
			t[i] = r.walk(t[i])
		}
		return t
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[r.text(k)] = r.walk(x)
		}
		return out
	}
	return v
}
