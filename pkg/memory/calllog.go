// The memory call log: one line per operation with its sizes, time, input
// and output, redacted and cut (memory_log_*).

package memory

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/hpcq/hpcq/internal/bufpool"
	"github.com/hpcq/hpcq/internal/jsonw"
	"github.com/hpcq/hpcq/internal/textcut"
)

// call is one line of memory_calls.jsonl.
type call struct {
	TS       time.Time `json:"ts"`
	Branch   string    `json:"branch"`
	Op       string    `json:"op"`
	InBytes  int       `json:"in_bytes"`
	OutBytes int       `json:"out_bytes"`
	// Input and Output are what went in and came out, redacted and cut to
	// memory_log_max_chars (the seed's memory log).
	Input      string  `json:"input,omitempty"`
	Output     string  `json:"output,omitempty"`
	Items      int     `json:"items,omitempty"`
	DurationMS float64 `json:"duration_ms"`
	Error      string  `json:"error,omitempty"`
}

func (m *Memory) record(branch, op string, start time.Time, in, out string, items int, err error) {
	if m.opts.Observe != nil {
		m.opts.Observe(op, time.Since(start), err)
	}
	if m.opts.Calls == nil {
		return
	}
	c := call{TS: m.opts.Now().UTC(), Branch: branch, Op: op, InBytes: len(in), OutBytes: len(out), Items: items,
		Input: m.logText(in), Output: m.logText(out), DurationMS: float64(time.Since(start).Microseconds()) / 1000}
	if err != nil {
		c.Error = m.redact(err.Error())
	}
	bp := bufpool.Get()
	defer bufpool.Put(bp)
	*bp = append(c.appendJSON(*bp), '\n')
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, werr := m.opts.Calls.Write(*bp); werr != nil {
		m.opts.Logger.Warn("memory call log write failed", "err", werr)
	}
}

// appendJSON appends c's line, the bytes json.Marshal writes for it,
// without reflection: every memory call writes one.
func (c *call) appendJSON(dst []byte) []byte {
	start := len(dst)
	dst, okTime := jsonw.AppendTime(append(dst, `{"ts":`...), c.TS)
	_, okFloat := jsonw.AppendFloat(nil, c.DurationMS)
	if !okTime || !okFloat {
		// What json.Marshal writes its own way (exponents) or refuses (a
		// time RFC 3339 cannot write, NaN): as it does.
		data, err := json.Marshal(c)
		if err != nil {
			data, _ = json.Marshal(call{Branch: c.Branch, Op: c.Op, Error: fmt.Sprintf("the call log could not write this call (at %s): %v", c.TS, err)})
		}
		return append(dst[:start], data...)
	}
	dst = jsonw.AppendString(append(dst, `,"branch":`...), c.Branch)
	dst = jsonw.AppendString(append(dst, `,"op":`...), c.Op)
	dst = strconv.AppendInt(append(dst, `,"in_bytes":`...), int64(c.InBytes), 10)
	dst = strconv.AppendInt(append(dst, `,"out_bytes":`...), int64(c.OutBytes), 10)
	if c.Input != "" {
		dst = jsonw.AppendString(append(dst, `,"input":`...), c.Input)
	}
	if c.Output != "" {
		dst = jsonw.AppendString(append(dst, `,"output":`...), c.Output)
	}
	if c.Items != 0 {
		dst = strconv.AppendInt(append(dst, `,"items":`...), int64(c.Items), 10)
	}
	dst, _ = jsonw.AppendFloat(append(dst, `,"duration_ms":`...), c.DurationMS)
	if c.Error != "" {
		dst = jsonw.AppendString(append(dst, `,"error":`...), c.Error)
	}
	return append(dst, '}')
}

// logText is text as the call log keeps it: redacted, cut to
// memory_log_max_chars (on a rune boundary, marked).
func (m *Memory) logText(text string) string {
	text = m.redact(text)
	if n := m.cfg.LogMaxChars; len(text) > n {
		text = text[:textcut.Floor(text, n)] + "…[cut]"
	}
	return text
}
