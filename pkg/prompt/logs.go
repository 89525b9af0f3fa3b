package prompt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// Logs writes every prompt and raw reply of a run in two files in each
// node's directory: nodes/<node>/prompts.md (readable: for each exchange,
// each message, then the reply or the error) and prompts.jsonl (one JSON
// object per exchange: the same, as data). Exchanges are numbered in order per
// node, across restarts of the run. Secrets are redacted as in the memory.
//
// Two files per node, appended, and not two per exchange in a directory of
// their own: on a cluster's shared file system every file created is a round
// trip to its metadata server, and a run of 10,000 nodes made 70,000 of them
// for its prompt logs.
type Logs struct {
	Dir  string
	mu   sync.Mutex
	node map[string]*nodeLog
}

// nodeLog is one node's log: its exchanges are written one at a time, so
// that their numbers and the order of the two files' entries agree.
type nodeLog struct {
	mu sync.Mutex
	// n: exchanges logged so far; -1 until read from the files.
	n int
}

// MaxLoggedReply bounds a reply as the logs keep it: a longer one is kept
// as its head and tail with the size left out.
const MaxLoggedReply = 1 << 20

// LogRecord is one exchange as a node's prompts.jsonl keeps it (one per line).
type LogRecord struct {
	N         int           `json:"n"`
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
}

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
	msgs := make([]llm.Message, len(e.Request.Messages))
	for i, m := range e.Request.Messages {
		msgs[i] = llm.Message{Role: m.Role, Content: memory.Redact(m.Content)}
		for _, img := range m.Images {
			// The pictures are files of the run; the log names them.
			msgs[i].Content += fmt.Sprintf("\n[image: %s, %d bytes]", img.MIME, len(img.Data))
		}
	}
	rec := LogRecord{Time: time.Now().UTC(), Node: node, Purpose: purpose, Attempt: e.Attempt, Messages: msgs,
		Reply: memory.Redact(Excerpt(e.Response.Content, MaxLoggedReply)), Model: e.Response.Model,
		TokensIn: e.Response.TokensIn, TokensOut: e.Response.TokensOut}
	if e.Err != nil {
		rec.Error = memory.Redact(e.Err.Error())
	}
	d := rundir.Dir(l.Dir)
	mdPath, jsonPath := d.Path(rundir.NodeFile(node, rundir.PromptsLog)), d.Path(rundir.NodeFile(node, rundir.PromptsJSONL))
	nl, err := l.open(node)
	if err != nil {
		return fmt.Errorf("prompt logs: %w", err)
	}
	nl.mu.Lock()
	defer nl.mu.Unlock()
	if nl.n < 0 {
		// A run resumed goes on numbering where the node's log ends.
		switch n, err := countLines(jsonPath); {
		case err == nil:
			nl.n = n
		case errors.Is(err, fs.ErrNotExist):
			nl.n = 0
		default:
			return fmt.Errorf("prompt logs: %w", err)
		}
	}
	rec.N = nl.n + 1
	line, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := appendFile(jsonPath, append(line, '\n')); err != nil {
		return fmt.Errorf("prompt logs: %w", err)
	}
	nl.n = rec.N

	var b strings.Builder
	fmt.Fprintf(&b, "# %03d %s of %s (attempt %d), %s\n\n", rec.N, purpose, node, e.Attempt, rec.Time.Format(time.RFC3339))
	for _, m := range msgs {
		fmt.Fprintf(&b, "## %s\n\n%s\n\n", m.Role, m.Content)
	}
	if rec.Error != "" {
		fmt.Fprintf(&b, "## error\n\n%s\n\n", rec.Error)
	} else {
		fmt.Fprintf(&b, "## reply (%s, %d tokens in, %d out)\n\n%s\n\n", rec.Model, rec.TokensIn, rec.TokensOut, rec.Reply)
	}
	if err := appendFile(mdPath, []byte(b.String())); err != nil {
		return fmt.Errorf("prompt logs: %w", err)
	}
	return nil
}

// open gives node's log, making the node's directory the first time.
func (l *Logs) open(node string) (*nodeLog, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	nl := l.node[node]
	if nl == nil {
		if err := os.MkdirAll(rundir.Dir(l.Dir).Path(rundir.NodeFile(node)), 0o755); err != nil {
			return nil, err
		}
		if l.node == nil {
			l.node = map[string]*nodeLog{}
		}
		nl = &nodeLog{n: -1}
		l.node[node] = nl
	}
	return nl, nil
}

// appendFile appends data to path in one write, making the file if needed.
func appendFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// countLines counts the complete lines of a file (0 for an empty one).
func countLines(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n, buf := 0, make([]byte, 64<<10)
	for {
		k, err := f.Read(buf)
		n += bytes.Count(buf[:k], []byte{'\n'})
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return 0, err
		}
	}
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
