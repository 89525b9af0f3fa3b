package prompt

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/memory"
)

// Logs writes every prompt and raw reply of a run under
// <run>/prompt_logs/<node>/: NNN_<purpose>.json (the exchange as data) and
// NNN_<purpose>.md (readable: each message, then the reply or the error),
// numbered in order per node. Secrets are redacted as in the memory.
type Logs struct {
	Dir string
	mu  sync.Mutex
	n   map[string]int
	// made: nodes whose directory exists.
	made map[string]bool
}

// MaxLoggedReply bounds a reply as the logs keep it: a longer one is kept
// as its head and tail with the size left out.
const MaxLoggedReply = 1 << 20

// Write records one exchange of node.
func (l *Logs) Write(node, purpose string, e Exchange) error {
	if err := checkName(node); err != nil {
		return fmt.Errorf("prompt logs: node %q: %w", node, err)
	}
	if purpose == "" {
		purpose = "chat"
	}
	if err := checkName(purpose); err != nil {
		return fmt.Errorf("prompt logs: purpose %q: %w", purpose, err)
	}
	l.mu.Lock()
	if l.n == nil {
		l.n = map[string]int{}
	}
	l.n[node]++
	n := l.n[node]
	made := l.made[node]
	l.mu.Unlock()
	dir := filepath.Join(l.Dir, "prompt_logs", node)
	if !made { // once per node and process: a directory costs as much as a file
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("prompt logs: %w", err)
		}
		l.mu.Lock()
		if l.made == nil {
			l.made = map[string]bool{}
		}
		l.made[node] = true
		l.mu.Unlock()
	}
	base := filepath.Join(dir, fmt.Sprintf("%03d_%s", n, purpose))
	msgs := make([]llm.Message, len(e.Request.Messages))
	for i, m := range e.Request.Messages {
		msgs[i] = llm.Message{Role: m.Role, Content: memory.Redact(m.Content)}
		for _, img := range m.Images {
			// The pictures are files of the run; the log names them.
			msgs[i].Content += fmt.Sprintf("\n[image: %s, %d bytes]", img.MIME, len(img.Data))
		}
	}
	rec := struct {
		Time      time.Time     `json:"time"`
		Node      string        `json:"node"`
		Purpose   string        `json:"purpose"`
		Attempt   int           `json:"attempt"`
		Messages  []llm.Message `json:"messages"`
		Reply     string        `json:"reply,omitempty"`
		Model     string        `json:"model,omitempty"`
		TokensIn  int           `json:"tokens_in,omitempty"`
		TokensOut int           `json:"tokens_out,omitempty"`
		Error     string        `json:"error,omitempty"`
	}{time.Now().UTC(), node, purpose, e.Attempt, msgs, memory.Redact(Excerpt(e.Response.Content, MaxLoggedReply)), e.Response.Model,
		e.Response.TokensIn, e.Response.TokensOut, ""}
	if e.Err != nil {
		rec.Error = memory.Redact(e.Err.Error())
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(base+".json", append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("prompt logs: %w", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s of %s (attempt %d)\n\n", purpose, node, e.Attempt)
	for _, m := range msgs {
		fmt.Fprintf(&b, "## %s\n\n%s\n\n", m.Role, m.Content)
	}
	if rec.Error != "" {
		fmt.Fprintf(&b, "## error\n\n%s\n", rec.Error)
	} else {
		fmt.Fprintf(&b, "## reply (%s, %d tokens in, %d out)\n\n%s\n", rec.Model, rec.TokensIn, rec.TokensOut, rec.Reply)
	}
	if err := os.WriteFile(base+".md", []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("prompt logs: %w", err)
	}
	return nil
}

// checkName keeps a log's directory and file names plain: they come from
// node ids and purposes.
func checkName(s string) error {
	if s == "" || len(s) > 128 || s[0] == '.' || s[0] == '-' {
		return fmt.Errorf("must be 1 to 128 letters, digits, '.', '_' or '-', not starting with '.' or '-'")
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("character %q not allowed", r)
		}
	}
	return nil
}
