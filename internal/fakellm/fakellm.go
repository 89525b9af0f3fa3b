// Package fakellm is an httptest server speaking the OpenAI chat
// completions API, for tests that drive whole runs: the LLM endpoint is the
// one component of hpcq that cannot run here. A test scripts the replies
// from what each request asks for (its Kind, its Attempt).
package fakellm

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hpcq/hpcq/internal/chatsse"
)

// Message is a request's message as the server read it: its text, and the
// images of its image_url parts (data URLs).
type Message struct {
	Role, Content string
	Images        []Image
}

// Image is an image a message carried.
type Image struct {
	MIME string
	Data []byte
}

// Request is a chat request as the server saw it.
type Request struct {
	N        int // 1-based arrival order
	Model    string
	Messages []Message
	// Kind is what the prompt asks for: phase0, draft, debug, improve,
	// hyperparam, ablation, judge, install, summarize, compress, or "".
	Kind string
	// Attempt is 1 for a first request, n+1 after n replies of the same
	// conversation (retries with feedback, memory read rounds).
	Attempt int
	// KindN counts the first attempts of this kind: the KindN-th draft.
	KindN int
	// JSON: the request asked for a JSON object (response_format json_object).
	JSON bool
	// Stream: the reply was asked as a stream.
	Stream bool
	// The output limit as sent (max_tokens or max_completion_tokens), the
	// temperature (nil: not sent) and reasoning_effort.
	MaxTokens, MaxCompletionTokens int
	Temperature                    *float64
	ReasoningEffort                string
	// Body is the request's body as sent, Path its path and query.
	Body []byte
	Path string
}

// Last is the content of the last message.
func (r Request) Last() string { return r.Messages[len(r.Messages)-1].Content }

// Reply is what the server answers. Status 0 means 200 with Content.
type Reply struct {
	Status  int
	Header  map[string]string
	Content string
	// FinishReason defaults to "stop".
	FinishReason string
	// Delay before answering (a timeout test).
	Delay     time.Duration
	TokensIn  int
	TokensOut int
	// ReasoningTokens (of TokensOut) and CachedTokens (of TokensIn) go in
	// the usage's details.
	ReasoningTokens, CachedTokens int
	// NoUsage leaves the usage out (a stream's usage chunk too), as some
	// servers do.
	NoUsage bool
	// Cut ends a streamed reply after its content, without a finish_reason
	// or [DONE] (a dropped stream).
	Cut bool
	// Body is the answer's body for a Status other than 200 (default: an
	// error of the API's shape saying "scripted status N").
	Body string
	// Refusal is the model's refusal: message.refusal with a null content
	// (streamed as delta.refusal), finish_reason stop, as OpenAI sends it.
	Refusal string
	// Filter, with FinishReason content_filter, is the choice's
	// content_filter_results (FilterResults), as Azure OpenAI sends them.
	Filter map[string]any
}

// Server is the fake endpoint.
type Server struct {
	*httptest.Server
	handle func(Request) Reply
	drop   bool // keep no request
	opt    Options

	arrived atomic.Int64

	mu    sync.Mutex
	n     int
	reqs  []Request
	kindN map[string]int
}

// New starts a server answering with handle; it stops with the test.
func New(t testing.TB, handle func(Request) Reply) *Server {
	return NewWith(t, Options{}, handle)
}

// NewWith is New with options.
func NewWith(t testing.TB, opt Options, handle func(Request) Reply) *Server {
	s := &Server{handle: handle, kindN: map[string]int{}, opt: opt}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// NewOn is New listening on addr (host:port; port 0 picks one): reachable
// from other network namespaces through that address.
func NewOn(t testing.TB, addr string, handle func(Request) Reply) *Server {
	s, err := Start(addr, true, handle)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Start is NewOn outside a test (a benchmark's endpoint): the caller
// closes it. keep: Requests returns the requests (a long benchmark drops
// them; the counts stay).
func Start(addr string, keep bool, handle func(Request) Reply) (*Server, error) {
	return StartWith(addr, keep, Options{}, handle)
}

// StartWith is Start with options.
func StartWith(addr string, keep bool, opt Options, handle func(Request) Reply) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("fake LLM endpoint on %s: %w", addr, err)
	}
	s := &Server{handle: handle, kindN: map[string]int{}, drop: !keep, opt: opt}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	_ = s.Server.Listener.Close()
	s.Server.Listener = ln
	s.Server.Start()
	return s, nil
}

// URL of the API (OPENAI_BASE_URL): an Azure resource's endpoint, or
// .../v1.
func (s *Server) BaseURL() string {
	if s.opt.Azure {
		return s.URL
	}
	return s.URL + "/v1"
}

// Requests returns the requests so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Arrivals counts every request that reached the server, refused ones
// included.
func (s *Server) Arrivals() int64 { return s.arrived.Load() }

// Count returns how many first attempts of kind arrived.
func (s *Server) Count(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kindN[kind]
}

// serve answers one request as the API would.
//
// Long: the endpoint's handling of a request in the order the API applies
// its checks (method, path, key, body, rules), then the reply.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.arrived.Add(1)
	want := "/v1/chat/completions"
	if s.opt.Azure {
		want = "/openai/deployments/{deployment}/chat/completions"
		dep, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/openai/deployments/"), "/chat/completions")
		if ok && dep != "" && !strings.Contains(dep, "/") && strings.HasPrefix(r.URL.Path, "/openai/deployments/") {
			want = r.URL.Path
		}
	}
	if r.URL.Path != want {
		refuse(w, http.StatusNotFound, "invalid_request_error", "", "", "Invalid URL (POST "+r.URL.Path+")")
		return
	}
	if !s.authorized(w, r) {
		return
	}
	var body wireRequest
	data, _ := io.ReadAll(r.Body)
	msgs, err := []Message(nil), json.Unmarshal(data, &body)
	for _, m := range body.Messages {
		if err != nil {
			break
		}
		var msg Message
		msg, err = message(m.Role, m.Content)
		msgs = append(msgs, msg)
	}
	for i, m := range body.Messages {
		if c := strings.TrimSpace(string(m.Content)); c == "" || c == "null" {
			refuse(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("messages.[%d].content", i), "",
				"Invalid value for 'content': expected a string, got null.")
			return
		}
	}
	if err != nil || len(msgs) == 0 {
		refuse(w, http.StatusBadRequest, "invalid_request_error", "messages", "", "We could not parse the JSON body of your request.")
		return
	}
	if s.opt.Azure {
		body.Model = strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/openai/deployments/"), "/chat/completions")
	}
	if !s.checkRules(w, body) {
		return
	}
	req := Request{Model: body.Model, Messages: msgs, Kind: KindOf(msgs), Attempt: 1,
		JSON: body.ResponseFormat != nil && body.ResponseFormat.Type == "json_object", Stream: body.Stream, MaxTokens: body.MaxTokens,
		MaxCompletionTokens: body.MaxCompletionTokens, Temperature: body.Temperature, ReasoningEffort: body.ReasoningEffort, Body: data,
		Path: r.URL.RequestURI()}
	for _, m := range msgs {
		if m.Role == "assistant" {
			req.Attempt++
		}
	}
	s.mu.Lock()
	s.n++
	req.N = s.n
	if req.Attempt == 1 {
		s.kindN[req.Kind]++
	}
	req.KindN = s.kindN[req.Kind]
	if !s.drop {
		s.reqs = append(s.reqs, req)
	}
	s.mu.Unlock()

	rep := s.handle(req)
	if rep.Delay > 0 {
		select {
		case <-time.After(rep.Delay):
		case <-r.Context().Done():
			return
		}
	}
	for k, v := range rep.Header {
		w.Header().Set(k, v)
	}
	if rep.Status != 0 && rep.Status != http.StatusOK {
		if rep.Body != "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(rep.Status)
			_, _ = io.WriteString(w, rep.Body)
			return
		}
		refuse(w, rep.Status, "test", "", "", fmt.Sprintf("scripted status %d", rep.Status))
		return
	}
	finish := rep.FinishReason
	if finish == "" {
		finish = "stop"
	}
	usage := map[string]any{"prompt_tokens": rep.TokensIn, "completion_tokens": rep.TokensOut, "total_tokens": rep.TokensIn + rep.TokensOut,
		"prompt_tokens_details":     map[string]int{"cached_tokens": rep.CachedTokens},
		"completion_tokens_details": map[string]int{"reasoning_tokens": rep.ReasoningTokens}}
	id := "chatcmpl-" + strconv.Itoa(req.N)
	if body.Stream {
		var u any
		if body.StreamOptions != nil && body.StreamOptions.IncludeUsage && !rep.NoUsage {
			u = usage
		}
		if rep.Cut {
			finish = ""
		}
		var filter any
		if rep.Filter != nil {
			filter = rep.Filter
		}
		chatsse.Write(w, chatsse.Reply{ID: id, Model: s.opt.answered(body.Model), Content: rep.Content, FinishReason: finish, Usage: u,
			Chunk: s.opt.Chunk, Refusal: rep.Refusal, Filter: filter})
		return
	}
	message := map[string]any{"role": "assistant", "content": rep.Content}
	if rep.Refusal != "" {
		message = map[string]any{"role": "assistant", "content": nil, "refusal": rep.Refusal}
	}
	choice := map[string]any{"index": 0, "message": message, "finish_reason": finish}
	if rep.Filter != nil {
		choice["content_filter_results"] = rep.Filter
	}
	reply := map[string]any{
		"id": id, "object": "chat.completion", "created": time.Now().Unix(), "model": s.opt.answered(body.Model),
		"choices": []any{choice},
	}
	if !rep.NoUsage {
		reply["usage"] = usage
	}
	out, _ := json.Marshal(reply)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// kinds maps a phrase of each prompt to its kind. The writeup's come first:
// their prompts carry a run's notes, which may quote the others.
var kinds = []struct{ phrase, kind string }{
	{"Write the paper of the HPC experiment run below", "writeup"},
	{"Review the rendered pages of the paper below", "writeup_review"},
	{"You are planning an HPC experiment", "phase0"},
	{"Write a first complete implementation", "draft"},
	{"The implementation below failed", "debug"},
	{"The implementation below works", "improve"},
	{"Tune the implementation below", "hyperparam"},
	{"Remove or disable one component", "ablation"},
	{"Pick the node that best serves", "judge"},
	{"Review the execution output of an HPC experiment node", "execution_review"},
	{"Summarize the experiment node below", "summary"},
	{"Extract the metrics from the execution output", "parse_metrics"},
	{"Look at the plots an HPC experiment node made", "vlm_analysis"},
	{"running summary", "summarize"},
	{"Compress the following", "compress"},
	{"one shell command at a time", "install"},
}

// KindOf tells what a conversation asks for, from its first messages.
func KindOf(msgs []Message) string {
	var head strings.Builder
	for i, m := range msgs {
		if i == 2 {
			break
		}
		head.WriteString(m.Content)
	}
	h := head.String()
	for _, k := range kinds {
		if strings.Contains(h, k.phrase) {
			return k.kind
		}
	}
	return ""
}

// File is a workspace file of a scripted reply.
type File struct{ Path, Content string }

// Artifacts is the JSON payload of a node reply.
func Artifacts(files []File, compile, run []string) string {
	fs := make([]map[string]string, len(files))
	for i, f := range files {
		fs[i] = map[string]string{"path": f.Path, "content": f.Content}
	}
	data, _ := json.Marshal(map[string]any{"phase_artifacts": map[string]any{
		"download": map[string]any{"commands": []string{}},
		"coding":   map[string]any{"workspace": map[string]any{"files": fs}},
		"compile":  map[string]any{"commands": compile},
		"run":      map[string]any{"commands": run},
	}})
	return string(data)
}

// Plan is the JSON payload of a Phase 0 reply.
func Plan(approach string) string {
	data, _ := json.Marshal(map[string]any{"plan": map[string]any{"goal": "the metric", "approach": approach}})
	return string(data)
}

// WithMemory puts a <memory_update> block (JSON) before a payload.
func WithMemory(update, payload string) string {
	return "<memory_update>\n" + update + "\n</memory_update>\n" + payload
}

// message reads a request's message: its content a string, or parts (text
// and image_url with a data URL: the images).
func message(role string, content json.RawMessage) (Message, error) {
	m := Message{Role: role}
	if json.Unmarshal(content, &m.Content) == nil {
		return m, nil
	}
	var parts []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL *struct {
			URL string `json:"url"`
		} `json:"image_url"`
	}
	if err := json.Unmarshal(content, &parts); err != nil {
		return m, err
	}
	for _, p := range parts {
		switch {
		case p.Type == "text":
			m.Content += p.Text
		case p.Type == "image_url" && p.ImageURL != nil:
			head, b64, ok := strings.Cut(strings.TrimPrefix(p.ImageURL.URL, "data:"), ";base64,")
			if !ok {
				return m, fmt.Errorf("image_url is not a data URL")
			}
			data, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				return m, err
			}
			m.Images = append(m.Images, Image{MIME: head, Data: data})
		}
	}
	return m, nil
}
