package llm

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/hpcq/hpcq/internal/bufpool"
	"github.com/hpcq/hpcq/internal/jsonw"
	"github.com/hpcq/hpcq/internal/textcut"
)

// OpenAIOptions configure the openai backend. Zero values take the
// defaults in brackets.
type OpenAIOptions struct {
	// BaseURL of an OpenAI-compatible API (OPENAI_BASE_URL) [https://api.openai.com/v1]:
	// OpenAI, vLLM, Ollama, llama.cpp server, ...
	BaseURL string
	// APIKey (OPENAI_API_KEY); some local servers need none.
	APIKey string
	// Model when a request names none (HPCQ_LLM_MODEL).
	Model string
	// MaxAttempts per request, the first included [5].
	MaxAttempts int
	// Backoff before the second attempt, doubled for each next one, with
	// jitter, capped at MaxBackoff [1s, 30s]. A Retry-After from the server
	// wins (up to MaxBackoff).
	Backoff, MaxBackoff time.Duration
	// Timeout of one attempt [120s].
	Timeout time.Duration
	// Concurrency bounds the requests in flight [4].
	Concurrency int
	Logger      *slog.Logger
	// HTTPClient [a client with a transport of its own].
	HTTPClient *http.Client
}

// OpenAI is the backend for OpenAI-compatible endpoints: the chat
// completions API, spoken directly (the request is encoded once per call,
// each field as the API defines it: a temperature of 0 is sent).
type OpenAI struct {
	hc   *http.Client
	url  string // .../chat/completions
	o    OpenAIOptions
	sem  chan struct{}
	wait func(context.Context, time.Duration) error
}

// NewOpenAI returns the backend; it does not contact the endpoint.
func NewOpenAI(o OpenAIOptions) (*OpenAI, error) {
	if o.Model == "" {
		return nil, fmt.Errorf("%w: no model (set HPCQ_LLM_MODEL)", ErrBadRequest)
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 5
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 120 * time.Second
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	base := strings.TrimRight(o.BaseURL, "/")
	if base == "" {
		base = "https://api.openai.com/v1"
	}
	hc := o.HTTPClient
	if hc == nil {
		// As many idle connections kept as requests may be in flight: the
		// default keeps 2 per host, so every wave of concurrent calls
		// dialled (and shook hands over TLS) again for all the others.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = max(o.Concurrency, tr.MaxIdleConnsPerHost)
		tr.MaxIdleConns = max(o.Concurrency, tr.MaxIdleConns)
		// A request carries the whole prompt (tens of KB): with the
		// default 4 KB buffer it went out in several writes, each a
		// system call (and on loopback a wakeup of the reader); with
		// 64 KB most go out in one.
		tr.WriteBufferSize = requestBuffer
		hc = &http.Client{Transport: tr}
	}
	return &OpenAI{hc: hc, url: base + "/chat/completions", o: o, sem: make(chan struct{}, o.Concurrency), wait: sleep}, nil
}

// requestBuffer is the write buffer of each connection to the endpoint.
const requestBuffer = 64 << 10

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// chatRequest is the body of a chat completion request.
type chatRequest struct {
	Model          string          `json:"model"`
	Messages       []chatMessage   `json:"messages"`
	MaxTokens      int             `json:"max_tokens,omitempty"`
	Temperature    *float64        `json:"temperature,omitempty"` // nil: the endpoint's default; 0 is sent
	ResponseFormat *responseFormat `json:"response_format,omitempty"`
}

type responseFormat struct {
	Type string `json:"type"`
}

// chatMessage is a message whose content is a string, or (with images)
// a list of content parts ([]contentPart).
type chatMessage struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

type contentPart struct {
	Type     string    `json:"type"` // text or image_url
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
}

type imageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// chatResponse is what a chat completion answers (the fields read).
type chatResponse struct {
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// APIError is an answer of the endpoint with a status other than 2xx.
type APIError struct {
	Status  int    // the HTTP status
	Message string // the error's message, or the start of the body
	Type    string // the error's type, when the body says
	Code    string // the error's code, when the body says
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("status %d %s", e.Status, http.StatusText(e.Status))
	if e.Type != "" || e.Code != "" {
		msg += " (" + strings.Trim(e.Type+" "+e.Code, " ") + ")"
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// maxReplyBytes bounds the body of an answer read: a chat completion is
// a few kilobytes to a few hundred; more is not an answer to use.
const maxReplyBytes = 32 << 20

// errReplyTooLarge: the endpoint's answer is over maxReplyBytes.
var errReplyTooLarge = fmt.Errorf("llm: the endpoint's answer is over %d MiB", maxReplyBytes>>20)

// errNotCompletion: the endpoint answered something that is not a chat
// completion (an HTML page, garbage), as a proxy or captive portal may.
var errNotCompletion = errors.New("llm: the endpoint's answer is not a chat completion")

// parseRetryAfter reads seconds or an HTTP date; 0 when absent or bad.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// retryable tells whether an attempt's error is worth another attempt:
// 408, 409, 429 and 5xx answers, timeouts and connection errors, answers
// that are not a chat completion or have no choices.
func retryable(err error) bool {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		code := apiErr.Status
		return code == http.StatusRequestTimeout || code == http.StatusConflict || code == http.StatusTooManyRequests || code >= 500
	}
	if errors.Is(err, errReplyTooLarge) {
		return false
	}
	var netErr net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) || errors.Is(err, errEmptyReply) ||
		errors.Is(err, errNotCompletion) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "EOF")
}

var errEmptyReply = errors.New("llm: the endpoint answered no choices")

// Chat sends the request, retrying what is retryable.
func (c *OpenAI) Chat(ctx context.Context, req Request) (Response, error) {
	if err := req.validate(); err != nil {
		return Response{}, err
	}
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return Response{}, ctx.Err()
	}
	defer func() { <-c.sem }()
	model := req.Model
	if model == "" {
		model = c.o.Model
	}
	body, err := encodeChat(model, req)
	if err != nil {
		return Response{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	start := time.Now()
	var last error
	for attempt := 1; attempt <= c.o.MaxAttempts; attempt++ {
		actx, cancel := context.WithTimeout(ctx, c.o.Timeout)
		resp, retryAfter, err := c.attempt(actx, body)
		cancel()
		if err == nil {
			ch := resp.Choices[0]
			return Response{Content: ch.Message.Content, Model: resp.Model, TokensIn: resp.Usage.PromptTokens,
				TokensOut: resp.Usage.CompletionTokens, FinishReason: ch.FinishReason, Latency: time.Since(start)}, nil
		}
		if ctx.Err() != nil {
			return Response{}, fmt.Errorf("llm: %s: %w", model, ctx.Err())
		}
		if !retryable(err) {
			return Response{}, fmt.Errorf("llm: %s: %w", model, err)
		}
		last = err
		if attempt == c.o.MaxAttempts {
			break
		}
		d := c.o.Backoff << (attempt - 1)
		d = d/2 + rand.N(d/2+1) // jitter: [d/2, d]
		if retryAfter > 0 {
			d = retryAfter
		}
		d = min(d, c.o.MaxBackoff)
		c.o.Logger.Warn("llm request failed; retrying", "model", model, "purpose", req.Purpose, "attempt", attempt, "in", d, "err", err)
		if err := c.wait(ctx, d); err != nil {
			return Response{}, fmt.Errorf("llm: %s: %w", model, err)
		}
	}
	return Response{}, fmt.Errorf("%w after %d attempts (%s): %w", ErrRetriesExhausted, c.o.MaxAttempts, model, last)
}

// encodeChat is the body of req's chat completion request: the bytes
// json.Marshal writes for its chatRequest, written without reflection when
// it has no images (a prompt of tens of kilobytes is most of its cost).
func encodeChat(model string, req Request) ([]byte, error) {
	if body, ok := appendChat(nil, model, req); ok {
		return body, nil
	}
	return marshalChat(model, req)
}

// appendChat appends the body of a request without images and with a
// temperature json.Marshal writes in plain decimal (not ok: neither is
// appended).
func appendChat(dst []byte, model string, req Request) (_ []byte, ok bool) {
	size := 128 + len(model)
	for _, m := range req.Messages {
		if len(m.Images) > 0 {
			return dst, false
		}
		size += 32 + len(m.Role) + len(m.Content) + len(m.Content)/16 // room for escapes
	}
	if t := req.Temperature; t != nil {
		if _, ok := jsonw.AppendFloat(nil, *t); !ok {
			return dst, false // NaN, an infinity or exponent notation: json.Marshal's
		}
	}
	dst = slices.Grow(dst, size)
	dst = jsonw.AppendString(append(dst, `{"model":`...), model)
	msgs := req.Messages
	if msgs == nil {
		msgs = []Message{} // marshalChat's list is never nil
	}
	dst = AppendMessagesJSON(append(dst, `,"messages":`...), msgs)
	if req.MaxTokens != 0 {
		dst = strconv.AppendInt(append(dst, `,"max_tokens":`...), int64(req.MaxTokens), 10)
	}
	if req.Temperature != nil {
		dst, _ = jsonw.AppendFloat(append(dst, `,"temperature":`...), *req.Temperature)
	}
	if req.JSON {
		dst = append(dst, `,"response_format":{"type":"json_object"}`...)
	}
	return append(dst, '}'), true
}

// AppendMessagesJSON appends msgs, which have no images, as the JSON array
// json.Marshal writes for them (a nil slice as null): a chat request's
// messages and a prompt log's.
func AppendMessagesJSON(dst []byte, msgs []Message) []byte {
	return jsonw.AppendList(dst, msgs, func(dst []byte, m Message) []byte {
		dst = jsonw.AppendString(append(dst, `{"role":`...), m.Role)
		return append(jsonw.AppendString(append(dst, `,"content":`...), m.Content), '}')
	})
}

// marshalChat is encodeChat through json.Marshal: any request.
func marshalChat(model string, req Request) ([]byte, error) {
	creq := chatRequest{Model: model, MaxTokens: req.MaxTokens, Temperature: req.Temperature, Messages: make([]chatMessage, 0, len(req.Messages))}
	if req.JSON {
		creq.ResponseFormat = &responseFormat{Type: "json_object"}
	}
	for _, m := range req.Messages {
		if len(m.Images) == 0 {
			creq.Messages = append(creq.Messages, chatMessage{Role: m.Role, Content: m.Content})
			continue
		}
		parts := []contentPart{{Type: "text", Text: m.Content}}
		for _, img := range m.Images {
			parts = append(parts, contentPart{Type: "image_url", ImageURL: &imageURL{
				URL: "data:" + img.MIME + ";base64," + base64.StdEncoding.EncodeToString(img.Data), Detail: "auto"}})
		}
		creq.Messages = append(creq.Messages, chatMessage{Role: m.Role, Content: parts})
	}
	return json.Marshal(creq)
}

// attempt posts body once and reads the answer; retryAfter is the
// server's Retry-After, if it gave one.
func (c *OpenAI) attempt(ctx context.Context, body []byte) (resp *chatResponse, retryAfter time.Duration, err error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	if c.o.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.o.APIKey)
	}
	hresp, err := c.hc.Do(hreq)
	if err != nil {
		return nil, 0, err
	}
	defer hresp.Body.Close()
	retryAfter = parseRetryAfter(hresp.Header.Get("Retry-After"), time.Now())
	// The body is read into a lent buffer: what readAnswer keeps of it is
	// copied.
	buf := bufpool.Get()
	defer bufpool.Put(buf)
	answer := bytes.NewBuffer(*buf)
	if n := hresp.ContentLength; n > 0 && n <= maxReplyBytes {
		answer.Grow(int(n) + bytes.MinRead) // room for the read that finds the end
	}
	_, err = answer.ReadFrom(io.LimitReader(hresp.Body, maxReplyBytes+1))
	*buf = answer.Bytes() // kept for the next answer, grown or not
	if err != nil {
		return nil, retryAfter, err
	}
	resp, err = readAnswer(hresp.StatusCode, hresp.Header.Get("Content-Type"), *buf)
	return resp, retryAfter, err
}

// answerOptions decode a completion as encoding/json would (names in any
// case, invalid UTF-8 replaced, a repeated name's last value kept), at
// twice its speed: every reply of the run is decoded with them.
var answerOptions = jsonv2.JoinOptions(jsonv2.MatchCaseInsensitiveNames(true), jsonv1.MatchCaseSensitiveDelimiter(true), jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))

// readAnswer makes a chat completion of an answer's status, Content-Type
// and body (read up to one byte past maxReplyBytes), or says why it is
// none: an *APIError for a status other than 2xx, errNotCompletion for a
// body that is not a completion, errEmptyReply for one without choices.
func readAnswer(status int, contentType string, data []byte) (*chatResponse, error) {
	if len(data) > maxReplyBytes {
		return nil, errReplyTooLarge
	}
	if status/100 != 2 {
		return nil, apiError(status, data)
	}
	// A proxy's or portal's page with status 200 is not an answer of the
	// endpoint: a transport error, retried like a 5xx.
	if contentType != "" && !strings.Contains(strings.ToLower(contentType), "json") {
		return nil, fmt.Errorf("%w: status %d with Content-Type %q: %q", errNotCompletion, status, contentType, head(data))
	}
	resp := &chatResponse{}
	if err := jsonv2.Unmarshal(data, resp, answerOptions); err != nil {
		return nil, fmt.Errorf("%w: %w: %q", errNotCompletion, err, head(data))
	}
	if len(resp.Choices) == 0 {
		return nil, errEmptyReply
	}
	return resp, nil
}

// apiError reads an error answer: the API's {"error": {...}} when the body
// is one, else the start of the body.
func apiError(status int, data []byte) *APIError {
	var body struct {
		Error *struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Code    json.RawMessage `json:"code"` // a string or a number, by server
		} `json:"error"`
	}
	e := &APIError{Status: status}
	if json.Unmarshal(data, &body) == nil && body.Error != nil {
		e.Message, e.Type = cutMessage(body.Error.Message), cutMessage(body.Error.Type)
		if code := strings.Trim(string(body.Error.Code), `"`); code != "null" {
			e.Code = cutMessage(code)
		}
		return e
	}
	e.Message = head(data)
	return e
}

// maxErrorChars bounds what an error answer's fields carry into an error
// (and the logs): an endpoint may say much more than a reason.
const maxErrorChars = 1000

// cutMessage is s, valid UTF-8, cut to maxErrorChars with "..." after a cut.
func cutMessage(s string) string {
	s = strings.ToValidUTF8(s, "?")
	if len(s) <= maxErrorChars {
		return s
	}
	return s[:textcut.Floor(s, maxErrorChars)] + "..."
}

// head is the start of an answer's body, on one line, for an error.
func head(data []byte) string {
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(data[:min(len(data), 160)]), "?")), " ")
	return s
}
