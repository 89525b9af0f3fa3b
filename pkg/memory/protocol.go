package memory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Errors of the <memory_update> protocol. Each error names the op.
var (
	// ErrMissingUpdate: the reply does not start with a <memory_update>
	// block and one was required; the caller retries with feedback.
	ErrMissingUpdate = errors.New("memory: reply does not start with a <memory_update> block")
	// ErrBadUpdate: the block is malformed: unclosed, invalid JSON, an
	// unknown op, a wrong type, or the same op under both spellings.
	ErrBadUpdate = errors.New("memory: invalid <memory_update> block")
	// ErrOversized: a value exceeds its limit.
	ErrOversized = errors.New("memory: value too large")
)

// Protocol limits.
const (
	MaxUpdateBytes  = 256 << 10
	MaxKeyLen       = 128
	MaxCoreValueLen = 16000
	MaxArchivalLen  = 32 << 10
	MaxOpsPerUpdate = 200
	MaxSearchK      = 50
	maxTagsPerItem  = 16
	maxTagLen       = 128
	openTag         = "<memory_update>"
	closeTag        = "</memory_update>"
	resultsOpenTag  = "<memory_results>"
	resultsCloseTag = "</memory_results>"
	defaultSearchK  = 5
)

// CoreWrite is one core set of an update.
type CoreWrite struct {
	Key        string
	Value      string
	Importance int
	TTL        time.Duration
}

// ArchivalWrite is one archival text of an update.
type ArchivalWrite struct {
	Text string   `json:"text"`
	Tags []string `json:"tags,omitempty"`
}

// SearchOp is an archival or recall search of an update.
type SearchOp struct {
	Query string   `json:"query"`
	K     int      `json:"k,omitempty"`
	Tags  []string `json:"tags,omitempty"`
}

// Update is a parsed <memory_update> block.
type Update struct {
	CoreSets       []CoreWrite
	CoreDeletes    []string
	Archival       []ArchivalWrite
	CoreGets       []string
	ArchivalSearch *SearchOp
	RecallSearch   *SearchOp
}

// HasReads reports whether the update asks for reads, which need a
// <memory_results> round.
func (u *Update) HasReads() bool {
	return len(u.CoreGets) > 0 || u.ArchivalSearch != nil || u.RecallSearch != nil
}

// opNames maps both spellings of the seeds to the op.
var opNames = map[string]string{
	"core": "core", "mem_core_set": "core",
	"core_delete": "core_delete", "mem_core_delete": "core_delete",
	"archival": "archival", "mem_archival_write": "archival",
	"core_get": "core_get", "mem_core_get": "core_get",
	"archival_search": "archival_search", "mem_archival_search": "archival_search",
	"recall_search": "recall_search", "mem_recall_search": "recall_search",
}

func bad(op, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrBadUpdate, op, fmt.Sprintf(format, args...))
}

// ParseReply splits a reply into its <memory_update> block and the payload
// after it. Without a block, update is nil and payload the whole reply,
// unless required (then ErrMissingUpdate).
func ParseReply(reply string, required bool) (update *Update, payload string, err error) {
	trimmed := strings.TrimLeft(reply, " \t\r\n\ufeff")
	if !strings.HasPrefix(trimmed, openTag) {
		if required {
			return nil, reply, ErrMissingUpdate
		}
		return nil, reply, nil
	}
	rest := trimmed[len(openTag):]
	end := strings.Index(rest, closeTag)
	if end < 0 {
		return nil, reply, bad("block", "no closing %s", closeTag)
	}
	body := rest[:end]
	payload = strings.TrimLeft(rest[end+len(closeTag):], " \t\r\n")
	if len(body) > MaxUpdateBytes {
		return nil, payload, fmt.Errorf("%w: <memory_update> block of %d bytes, at most %d", ErrOversized, len(body), MaxUpdateBytes)
	}
	u, err := ParseUpdate([]byte(body))
	return u, payload, err
}

// ParseUpdate parses the JSON object of a block.
func ParseUpdate(body []byte) (*Update, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&raw); err != nil {
		return nil, bad("block", "not a JSON object: %v", err)
	}
	if dec.More() {
		return nil, bad("block", "text after the JSON object")
	}
	if raw == nil {
		return nil, bad("block", "not a JSON object")
	}
	names := make([]string, 0, len(raw))
	for k := range raw {
		names = append(names, k)
	}
	sort.Strings(names) // deterministic errors
	seen := map[string]string{}
	u := &Update{}
	ops := 0
	for _, name := range names {
		op, ok := opNames[name]
		if !ok {
			return nil, bad(name, "unknown op (known: core, core_delete, archival, core_get, archival_search, recall_search, and their mem_ spellings)")
		}
		if prev, dup := seen[op]; dup {
			return nil, bad(name, "given twice, also as %s", prev)
		}
		seen[op] = name
		var err error
		switch op {
		case "core":
			u.CoreSets, err = parseCore(name, raw[name])
			ops += len(u.CoreSets)
		case "core_delete":
			u.CoreDeletes, err = parseKeys(name, raw[name])
			ops += len(u.CoreDeletes)
		case "core_get":
			u.CoreGets, err = parseKeys(name, raw[name])
			ops += len(u.CoreGets)
		case "archival":
			u.Archival, err = parseArchival(name, raw[name])
			ops += len(u.Archival)
		case "archival_search":
			u.ArchivalSearch, err = parseSearch(name, raw[name])
			ops++
		case "recall_search":
			u.RecallSearch, err = parseSearch(name, raw[name])
			ops++
		}
		if err != nil {
			return nil, err
		}
	}
	if ops > MaxOpsPerUpdate {
		return nil, fmt.Errorf("%w: %d operations in one block, at most %d", ErrOversized, ops, MaxOpsPerUpdate)
	}
	return u, nil
}

func checkKey(op, k string) error {
	switch {
	case strings.TrimSpace(k) == "":
		return bad(op, "empty key")
	case len(k) > MaxKeyLen:
		return fmt.Errorf("%w: %s: key %.40q... longer than %d", ErrOversized, op, k, MaxKeyLen)
	}
	if why := keyChars(k); why != "" {
		return bad(op, "key %q %s", k, why)
	}
	return nil
}

// keyChars says what is wrong with the characters of a core key, or "":
// invalid UTF-8, control characters (NUL, newlines) and format characters
// (the bidirectional overrides such as U+202E, which make a key read as
// another) are refused, as in workspace paths.
func keyChars(k string) string {
	if !utf8.ValidString(k) {
		return "is not valid UTF-8"
	}
	for _, r := range k {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return fmt.Sprintf("contains a control or format character (%U)", r)
		}
	}
	return ""
}

// parseCore reads {"key": "value"} or {"key": {"value": "...",
// "importance": 1-5, "ttl_s": N}}; a non-string scalar value is kept as its
// JSON text.
func parseCore(op string, raw json.RawMessage) ([]CoreWrite, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, bad(op, "must be an object of key -> value")
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]CoreWrite, 0, len(keys))
	for _, k := range keys {
		if err := checkKey(op, k); err != nil {
			return nil, err
		}
		v := bytes.TrimSpace(m[k])
		w := CoreWrite{Key: k}
		switch {
		case len(v) > 0 && v[0] == '"':
			if err := json.Unmarshal(v, &w.Value); err != nil {
				return nil, bad(op, "key %q: %v", k, err)
			}
		case len(v) > 0 && v[0] == '{':
			var obj struct {
				Value      *json.RawMessage `json:"value"`
				Importance int              `json:"importance"`
				TTLS       float64          `json:"ttl_s"`
			}
			d := json.NewDecoder(bytes.NewReader(v))
			d.DisallowUnknownFields()
			if err := d.Decode(&obj); err != nil || obj.Value == nil {
				return nil, bad(op, "key %q: want {\"value\": ..., \"importance\": 1-5, \"ttl_s\": seconds}", k)
			}
			if err := json.Unmarshal(*obj.Value, &w.Value); err != nil {
				w.Value = string(bytes.TrimSpace(*obj.Value))
			}
			if obj.Importance < 0 || obj.Importance > 5 {
				return nil, bad(op, "key %q: importance %d, must be 1 to 5", k, obj.Importance)
			}
			if obj.TTLS < 0 || obj.TTLS > 365*24*3600 {
				return nil, bad(op, "key %q: ttl_s %v out of range", k, obj.TTLS)
			}
			w.Importance, w.TTL = obj.Importance, time.Duration(obj.TTLS*float64(time.Second))
		case string(v) == "null":
			return nil, bad(op, "key %q: null value (use core_delete to remove a key)", k)
		default:
			w.Value = string(v) // numbers, booleans, arrays: their JSON text
		}
		if len(w.Value) > MaxCoreValueLen {
			return nil, fmt.Errorf("%w: %s: key %q: value of %d bytes, at most %d", ErrOversized, op, k, len(w.Value), MaxCoreValueLen)
		}
		out = append(out, w)
	}
	return out, nil
}

func parseKeys(op string, raw json.RawMessage) ([]string, error) {
	var keys []string
	if err := json.Unmarshal(raw, &keys); err != nil {
		var one string
		if json.Unmarshal(raw, &one) != nil {
			return nil, bad(op, "must be a list of keys")
		}
		keys = []string{one}
	}
	for _, k := range keys {
		if err := checkKey(op, k); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

func parseArchival(op string, raw json.RawMessage) ([]ArchivalWrite, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		items = []json.RawMessage{raw} // a single item
	}
	out := make([]ArchivalWrite, 0, len(items))
	for i, it := range items {
		var w ArchivalWrite
		d := json.NewDecoder(bytes.NewReader(it))
		d.DisallowUnknownFields()
		if err := d.Decode(&w); err != nil {
			return nil, bad(op, "item %d: want {\"text\": \"...\", \"tags\": [...]}: %v", i, err)
		}
		if strings.TrimSpace(w.Text) == "" {
			return nil, bad(op, "item %d: empty text", i)
		}
		if len(w.Text) > MaxArchivalLen {
			return nil, fmt.Errorf("%w: %s: item %d: text of %d bytes, at most %d", ErrOversized, op, i, len(w.Text), MaxArchivalLen)
		}
		if len(w.Tags) > maxTagsPerItem {
			return nil, fmt.Errorf("%w: %s: item %d: %d tags, at most %d", ErrOversized, op, i, len(w.Tags), maxTagsPerItem)
		}
		for _, t := range w.Tags {
			if strings.TrimSpace(t) == "" || len(t) > maxTagLen {
				return nil, bad(op, "item %d: tag %.40q must be 1 to %d bytes", i, t, maxTagLen)
			}
		}
		out = append(out, w)
	}
	return out, nil
}

func parseSearch(op string, raw json.RawMessage) (*SearchOp, error) {
	var s SearchOp
	var q string
	if json.Unmarshal(raw, &q) == nil {
		s.Query = q
	} else {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		if err := d.Decode(&s); err != nil {
			return nil, bad(op, "want {\"query\": \"...\", \"k\": N, \"tags\": [...]}: %v", err)
		}
	}
	if strings.TrimSpace(s.Query) == "" {
		return nil, bad(op, "empty query")
	}
	if len(s.Query) > 1024 {
		return nil, fmt.Errorf("%w: %s: query of %d bytes, at most 1024", ErrOversized, op, len(s.Query))
	}
	if s.K == 0 {
		s.K = defaultSearchK
	}
	if s.K < 0 || s.K > MaxSearchK {
		return nil, bad(op, "k %d, must be 1 to %d", s.K, MaxSearchK)
	}
	return &s, nil
}
