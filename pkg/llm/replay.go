package llm

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/hpcq/hpcq/internal/textcut"
)

// A cassette is a JSONL file of recorded exchanges, one per line:
//
//	{"key": "<sha256>", "loose_key": "<sha256>", "purpose": "draft", "request": {...}, "response": {...}}
//
// Replay looks a request up, in this order:
//  1. key: a hash of the whole request as sent (model, messages, temperature,
//     max_tokens, json);
//  2. loose_key: a hash of the messages alone, so that a cassette recorded
//     with another model name or sampling setting still serves;
//  3. purpose: a scripted exchange, a line with "scripted": true, a purpose
//     and a response but no request, answers any request of that purpose
//     (cassettes written by hand for offline examples and tests; the
//     example's README says its replies are scripted, not a model's);
//  4. nothing: ErrNoReply, naming the request. A reply is never invented.
//
// When several exchanges share a key, they are served in recorded order,
// and the last one again once they are used up (a run that asks the same
// question more often than the recording did gets the last answer).
type exchange struct {
	Key      string   `json:"key"`
	LooseKey string   `json:"loose_key"`
	Purpose  string   `json:"purpose,omitempty"`
	Scripted bool     `json:"scripted,omitempty"`
	Request  Request  `json:"request"`
	Response Response `json:"response"`
}

// Keys returns the exact and the loose key of a request.
func Keys(req Request) (key, loose string) {
	h := func(v any) string {
		data, _ := json.Marshal(v)
		sum := sha256.Sum256(data)
		return hex.EncodeToString(sum[:])
	}
	return h(req), h(req.Messages)
}

// Replay serves replies from a cassette.
type Replay struct {
	path   string
	mu     sync.Mutex
	exact  map[string][]Response
	loose  map[string][]Response
	script map[string][]Response // by purpose
	next   map[string]int
}

// OpenReplay reads a cassette.
func OpenReplay(path string) (*Replay, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("llm: cassette: %w", err)
	}
	defer f.Close()
	r := &Replay{path: path, exact: map[string][]Response{}, loose: map[string][]Response{}, script: map[string][]Response{}, next: map[string]int{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var e exchange
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("llm: cassette %s line %d: %w", path, line, err)
		}
		if e.Scripted {
			if e.Purpose == "" || len(e.Request.Messages) > 0 {
				return nil, fmt.Errorf("llm: cassette %s line %d: a scripted exchange has a purpose and no request", path, line)
			}
			r.script[e.Purpose] = append(r.script[e.Purpose], e.Response)
			continue
		}
		if e.Key == "" || e.LooseKey == "" {
			e.Key, e.LooseKey = Keys(e.Request)
		}
		r.exact[e.Key] = append(r.exact[e.Key], e.Response)
		r.loose[e.LooseKey] = append(r.loose[e.LooseKey], e.Response)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("llm: cassette %s: %w", path, err)
	}
	return r, nil
}

// Chat serves the recorded reply of the request.
func (r *Replay) Chat(ctx context.Context, req Request) (Response, error) {
	if err := req.validate(); err != nil {
		return Response{}, err
	}
	if err := ctx.Err(); err != nil {
		return Response{}, err
	}
	key, loose := Keys(req)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range []struct {
		id   string
		from map[string][]Response
	}{{"exact:" + key, r.exact}, {"loose:" + loose, r.loose}, {"purpose:" + req.Purpose, r.script}} {
		rs := k.from[strings.SplitN(k.id, ":", 2)[1]]
		if len(rs) == 0 {
			continue
		}
		i := min(r.next[k.id], len(rs)-1)
		r.next[k.id]++
		resp := rs[i]
		resp.CacheHit = true
		resp.Latency = 0
		return resp, nil
	}
	last := textcut.Head(req.Messages[len(req.Messages)-1].Content, 120)
	return Response{}, fmt.Errorf("%w in %s for request %s (purpose %q, last message %q)", ErrNoReply, r.path, key[:12], req.Purpose, last)
}

// Recorder passes requests to a live client and appends every exchange to
// a cassette (HPCQ_LLM_RECORD), for later offline replays.
type Recorder struct {
	Client Client
	mu     sync.Mutex
	f      *os.File
}

// NewRecorder appends to the cassette at path.
func NewRecorder(c Client, path string) (*Recorder, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("llm: record: %w", err)
	}
	return &Recorder{Client: c, f: f}, nil
}

// Chat asks the live client and records the exchange.
func (r *Recorder) Chat(ctx context.Context, req Request) (Response, error) {
	resp, err := r.Client.Chat(ctx, req)
	if err != nil {
		return resp, err
	}
	key, loose := Keys(req)
	data, merr := json.Marshal(exchange{Key: key, LooseKey: loose, Purpose: req.Purpose, Request: req, Response: resp})
	if merr != nil {
		return resp, merr
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, werr := r.f.Write(append(data, '\n')); werr != nil {
		return resp, fmt.Errorf("llm: record: %w", werr)
	}
	return resp, nil
}

// Close closes the cassette.
func (r *Recorder) Close() error { return r.f.Close() }
