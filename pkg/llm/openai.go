package llm

import (
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
	"strconv"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
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

// OpenAI is the backend for OpenAI-compatible endpoints (go-openai).
type OpenAI struct {
	c    *openai.Client
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
	cfg := openai.DefaultConfig(o.APIKey)
	if o.BaseURL != "" {
		cfg.BaseURL = strings.TrimRight(o.BaseURL, "/")
	}
	hc := o.HTTPClient
	if hc == nil {
		// As many idle connections kept as requests may be in flight: the
		// default keeps 2 per host, so every wave of concurrent calls
		// dialled (and shook hands over TLS) again for all the others.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = max(o.Concurrency, tr.MaxIdleConnsPerHost)
		tr.MaxIdleConns = max(o.Concurrency, tr.MaxIdleConns)
		hc = &http.Client{Transport: tr}
	}
	// The transport notes a Retry-After header where the attempt's context
	// says (go-openai's errors do not carry headers).
	wrapped := *hc
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	wrapped.Transport = retryAfterTransport{base}
	cfg.HTTPClient = &wrapped
	return &OpenAI{c: openai.NewClientWithConfig(cfg), o: o, sem: make(chan struct{}, o.Concurrency), wait: sleep}, nil
}

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

type retryAfterKey struct{}

type retryAfterTransport struct{ base http.RoundTripper }

func (t retryAfterTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err == nil && resp != nil {
		if p, ok := req.Context().Value(retryAfterKey{}).(*time.Duration); ok {
			*p = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		}
		// A proxy's or portal's page with status 200 is not an answer of
		// the endpoint: a transport error, retried like a 5xx.
		ct := resp.Header.Get("Content-Type")
		if resp.StatusCode/100 == 2 && ct != "" && !strings.Contains(strings.ToLower(ct), "json") {
			head, _ := io.ReadAll(io.LimitReader(resp.Body, 160))
			resp.Body.Close()
			return nil, fmt.Errorf("%w: status %d with Content-Type %q: %q", errNotCompletion, resp.StatusCode, ct, strings.TrimSpace(string(head)))
		}
	}
	return resp, err
}

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
// 408, 409, 429 and 5xx answers, timeouts and connection errors.
func retryable(err error) bool {
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	code := 0
	switch {
	case errors.As(err, &apiErr):
		code = apiErr.HTTPStatusCode
	case errors.As(err, &reqErr):
		code = reqErr.HTTPStatusCode
	}
	if code != 0 {
		return code == http.StatusRequestTimeout || code == http.StatusConflict || code == http.StatusTooManyRequests || code >= 500
	}
	var netErr net.Error
	var syntaxErr *json.SyntaxError
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) || errors.Is(err, errEmptyReply) ||
		errors.Is(err, errNotCompletion) || errors.As(err, &syntaxErr) ||
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
	creq := openai.ChatCompletionRequest{Model: model, MaxTokens: req.MaxTokens}
	if req.Temperature != nil {
		creq.Temperature = float32(*req.Temperature)
	}
	if req.JSON {
		creq.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject}
	}
	for _, m := range req.Messages {
		if len(m.Images) == 0 {
			creq.Messages = append(creq.Messages, openai.ChatCompletionMessage{Role: m.Role, Content: m.Content})
			continue
		}
		parts := []openai.ChatMessagePart{{Type: openai.ChatMessagePartTypeText, Text: m.Content}}
		for _, img := range m.Images {
			parts = append(parts, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{
				URL: "data:" + img.MIME + ";base64," + base64.StdEncoding.EncodeToString(img.Data), Detail: openai.ImageURLDetailAuto}})
		}
		creq.Messages = append(creq.Messages, openai.ChatCompletionMessage{Role: m.Role, MultiContent: parts})
	}
	start := time.Now()
	var last error
	for attempt := 1; attempt <= c.o.MaxAttempts; attempt++ {
		var retryAfter time.Duration
		actx, cancel := context.WithTimeout(context.WithValue(ctx, retryAfterKey{}, &retryAfter), c.o.Timeout)
		resp, err := c.c.CreateChatCompletion(actx, creq)
		cancel()
		if err == nil && len(resp.Choices) == 0 {
			err = errEmptyReply
		}
		if se := (*json.SyntaxError)(nil); errors.As(err, &se) {
			err = fmt.Errorf("%w: %w", errNotCompletion, err)
		}
		if err == nil {
			ch := resp.Choices[0]
			return Response{Content: ch.Message.Content, Model: resp.Model, TokensIn: resp.Usage.PromptTokens,
				TokensOut: resp.Usage.CompletionTokens, FinishReason: string(ch.FinishReason), Latency: time.Since(start)}, nil
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
