package prompt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hpcq/hpcq/internal/bufpool"
	"github.com/hpcq/hpcq/internal/fileio"
	"github.com/hpcq/hpcq/internal/jsonw"
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
// for its prompt logs. The two files of the nodes last logged stay open
// (MaxOpenNodes of them) until [Logs.Done] or [Logs.Close], so that a
// node's later exchanges are appended without opening them again.
type Logs struct {
	Dir  string
	mu   sync.Mutex
	node map[string]*nodeLog
	// open: the nodes whose files are open, oldest first.
	open []string
}

// MaxOpenNodes bounds the nodes whose two log files Logs keeps open: the
// least recently opened are closed first.
const MaxOpenNodes = 128

// nodeLog is one node's log: its exchanges are written one at a time, so
// that their numbers and the order of the two files' entries agree.
type nodeLog struct {
	mu sync.Mutex
	// n: exchanges logged so far; -1 until read from the files.
	n int
	// md and jsonl are the files while they are open, else nil.
	md, jsonl *fileio.Appender
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
	nl, err := l.nodeLog(node)
	if err != nil {
		return fmt.Errorf("prompt logs: %w", err)
	}
	opened, err := l.write(nl, node, &rec)
	if opened {
		l.opened(node)
	}
	if err != nil {
		return fmt.Errorf("prompt logs: %w", err)
	}
	return nil
}

// write appends rec to node's two files, opening them if they are closed
// (opened says so).
func (l *Logs) write(nl *nodeLog, node string, rec *LogRecord) (opened bool, err error) {
	nl.mu.Lock()
	defer nl.mu.Unlock()
	d := rundir.Dir(l.Dir)
	mdPath, jsonPath := d.Path(rundir.NodeFile(node, rundir.PromptsLog)), d.Path(rundir.NodeFile(node, rundir.PromptsJSONL))
	if nl.n < 0 {
		// A run resumed goes on numbering where the node's log ends.
		switch n, err := countLines(jsonPath); {
		case err == nil:
			nl.n = n
		case errors.Is(err, fs.ErrNotExist):
			nl.n = 0
		default:
			return false, err
		}
	}
	if nl.jsonl == nil {
		if nl.jsonl, err = fileio.OpenAppend(jsonPath); err != nil {
			return false, err
		}
		if nl.md, err = fileio.OpenAppend(mdPath); err != nil {
			nl.close()
			return false, err
		}
		opened = true
	}
	rec.N = nl.n + 1
	bp := bufpool.Get()
	defer bufpool.Put(bp)
	buf, err := rec.appendJSON(*bp)
	buf = append(buf, '\n')
	*bp = buf
	if err != nil {
		return opened, err
	}
	if _, err := nl.jsonl.Write(buf); err != nil {
		nl.close() // opened again, and so checked again, next time
		return opened, err
	}
	nl.n = rec.N

	buf = fmt.Appendf(buf[:0], "# %03d %s of %s (attempt %d), %s\n\n", rec.N, rec.Purpose, node, rec.Attempt, rec.Time.Format(time.RFC3339))
	for _, m := range rec.Messages {
		buf = append(append(append(buf, "## "...), m.Role...), "\n\n"...)
		buf = append(append(buf, m.Content...), "\n\n"...)
	}
	if rec.Error != "" {
		buf = append(append(append(buf, "## error\n\n"...), rec.Error...), "\n\n"...)
	} else {
		buf = fmt.Appendf(buf, "## reply (%s, %d tokens in, %d out)\n\n", rec.Model, rec.TokensIn, rec.TokensOut)
		buf = append(append(buf, rec.Reply...), "\n\n"...)
	}
	*bp = buf
	if _, err := nl.md.Write(buf); err != nil {
		nl.close()
		return opened, err
	}
	return opened, nil
}

// appendJSON appends r's JSON, the bytes json.Marshal writes for it,
// without reflection: each exchange's record carries its whole prompt.
func (r *LogRecord) appendJSON(dst []byte) ([]byte, error) {
	start := len(dst)
	dst = strconv.AppendInt(append(dst, `{"n":`...), int64(r.N), 10)
	dst, ok := jsonw.AppendTime(append(dst, `,"time":`...), r.Time)
	if !ok || slices.ContainsFunc(r.Messages, func(m llm.Message) bool { return len(m.Images) > 0 }) {
		// What json.Marshal refuses (a year or a zone RFC 3339 cannot
		// write) or writes through a method of its own (images' bytes).
		data, err := json.Marshal(r)
		return append(dst[:start], data...), err
	}
	dst = jsonw.AppendString(append(dst, `,"node":`...), r.Node)
	dst = jsonw.AppendString(append(dst, `,"purpose":`...), r.Purpose)
	dst = strconv.AppendInt(append(dst, `,"attempt":`...), int64(r.Attempt), 10)
	dst = llm.AppendMessagesJSON(append(dst, `,"messages":`...), r.Messages)
	if r.Reply != "" {
		dst = jsonw.AppendString(append(dst, `,"reply":`...), r.Reply)
	}
	if r.Model != "" {
		dst = jsonw.AppendString(append(dst, `,"model":`...), r.Model)
	}
	if r.TokensIn != 0 {
		dst = strconv.AppendInt(append(dst, `,"tokens_in":`...), int64(r.TokensIn), 10)
	}
	if r.TokensOut != 0 {
		dst = strconv.AppendInt(append(dst, `,"tokens_out":`...), int64(r.TokensOut), 10)
	}
	if r.Error != "" {
		dst = jsonw.AppendString(append(dst, `,"error":`...), r.Error)
	}
	return append(dst, '}'), nil
}

// nodeLog gives node's log, making the node's directory the first time.
func (l *Logs) nodeLog(node string) (*nodeLog, error) {
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

// New tells Logs that node's directory was just made, so that it has no
// log yet: its first exchange is numbered 1 without looking for one.
func (l *Logs) New(node string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.node == nil {
		l.node = map[string]*nodeLog{}
	}
	if l.node[node] == nil {
		l.node[node] = &nodeLog{n: 0}
	}
}

// opened notes that node's files were opened and closes those of the
// nodes opened longest ago past MaxOpenNodes. It runs with no node's lock
// held: closing takes the other node's.
func (l *Logs) opened(node string) {
	l.mu.Lock()
	l.open = append(slices.DeleteFunc(l.open, func(s string) bool { return s == node }), node)
	var evict []*nodeLog
	for len(l.open) > MaxOpenNodes {
		evict = append(evict, l.node[l.open[0]])
		l.open = l.open[1:]
	}
	l.mu.Unlock()
	for _, nl := range evict {
		nl.mu.Lock()
		nl.close()
		nl.mu.Unlock()
	}
}

// Done closes node's files: it has no more exchanges to log for now (a
// later one opens them again).
func (l *Logs) Done(node string) {
	l.mu.Lock()
	nl := l.node[node]
	l.open = slices.DeleteFunc(l.open, func(s string) bool { return s == node })
	l.mu.Unlock()
	if nl != nil {
		nl.mu.Lock()
		nl.close()
		nl.mu.Unlock()
	}
}

// Close closes every node's files. Logs can be written again after it.
func (l *Logs) Close() error {
	l.mu.Lock()
	nodes := make([]*nodeLog, 0, len(l.open))
	for _, id := range l.open {
		nodes = append(nodes, l.node[id])
	}
	l.open = nil
	l.mu.Unlock()
	var errs []error
	for _, nl := range nodes {
		nl.mu.Lock()
		errs = append(errs, nl.close())
		nl.mu.Unlock()
	}
	return errors.Join(errs...)
}

// close closes the node's files; its lock is held.
func (nl *nodeLog) close() error {
	var errs []error
	for _, f := range []**fileio.Appender{&nl.md, &nl.jsonl} {
		if *f != nil {
			errs = append(errs, (*f).Close())
			*f = nil
		}
	}
	return errors.Join(errs...)
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
