package llm

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Message is one chat message.
type Message struct {
	Role    string `json:"role"` // system, user or assistant
	Content string `json:"content"`
	// Images go with a user message as image content, for a model that
	// accepts images (run.yaml llm.vision or llm.vlm_model).
	Images []Image `json:"images,omitempty"`
}

// Image is a picture sent to the model.
type Image struct {
	MIME string `json:"mime"` // image/png, image/jpeg, image/gif or image/webp
	Data []byte `json:"data"`
}

// Limits of the images of a request.
const (
	MaxImages     = 8
	MaxImageBytes = 4 << 20
)

// ImageMIME is the MIME type of an image file the models accept, by its
// extension; "" for others (SVG is sent as text).
func ImageMIME(name string) string {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".png":
		return "image/png"
	case ".jpg", ".jpeg":
		return "image/jpeg"
	case ".gif":
		return "image/gif"
	case ".webp":
		return "image/webp"
	}
	return ""
}

// Request is one chat completion request.
type Request struct {
	Messages []Message `json:"messages"`
	// Model overrides the client's default model.
	Model string `json:"model,omitempty"`
	// Temperature: nil leaves the endpoint's default.
	Temperature *float64 `json:"temperature,omitempty"`
	// MaxTokens bounds the reply (max_tokens, or max_completion_tokens for
	// a reasoning model: its reasoning included).
	MaxTokens int `json:"max_tokens,omitempty"`
	// ReasoningEffort of a reasoning model (none, minimal, low, medium,
	// high); "" leaves the endpoint's default.
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	// JSON asks for a JSON object reply (response_format json_object).
	JSON bool `json:"json,omitempty"`
	// Purpose and Node label the call in llm_calls (draft, debug, phase0,
	// compress, summarize, ...); they are not sent.
	Purpose string `json:"-"`
	Node    string `json:"-"`
}

// Response is a completion.
type Response struct {
	Content      string `json:"content"`
	Model        string `json:"model"`
	TokensIn     int    `json:"tokens_in"`
	TokensOut    int    `json:"tokens_out"`
	FinishReason string `json:"finish_reason,omitempty"`
	// Refusal is the model's refusal (message.refusal; Content is then
	// empty), Filter the categories a content filter named (Azure's
	// content_filter_results), Limit the output limit the request was sent
	// with (0: none); Requested the model the request named (an endpoint
	// answers with a dated snapshot of it: gpt-4o-mini-2024-07-18).
	Refusal   string `json:"refusal,omitempty"`
	Filter    string `json:"filter,omitempty"`
	Limit     int    `json:"limit,omitempty"`
	Requested string `json:"requested,omitempty"`
	// Serves is the model an Azure deployment serves (HPCQ_LLM_SERVES),
	// priced when neither the answered nor the requested name is.
	Serves string `json:"serves,omitempty"`
	// ReasoningTokens are the completion tokens spent on reasoning (part
	// of TokensOut); CachedTokens the prompt tokens the endpoint served
	// from its prompt cache (part of TokensIn).
	ReasoningTokens int `json:"reasoning_tokens,omitempty"`
	CachedTokens    int `json:"cached_tokens,omitempty"`
	// UsageEstimated: the endpoint reported no usage; the tokens were
	// counted here (o200k_base).
	UsageEstimated bool `json:"usage_estimated,omitempty"`
	// Note says what the client did beyond one exchange (a reply cut by
	// reasoning asked again).
	Note    string        `json:"note,omitempty"`
	Latency time.Duration `json:"-"`
	// CacheHit: served from a cassette, not a model.
	CacheHit bool `json:"-"`
}

// Client sends chat requests to a model.
type Client interface {
	Chat(ctx context.Context, req Request) (Response, error)
}

// Errors of the clients; the returned errors wrap them with detail.
var (
	// ErrNoReply: the replay cassette has no reply for the request.
	ErrNoReply = errors.New("llm: no recorded reply")
	// ErrRetriesExhausted: every attempt failed with a retryable error.
	ErrRetriesExhausted = errors.New("llm: retries exhausted")
	// ErrBadRequest: the request itself is wrong (no messages, ...).
	ErrBadRequest = errors.New("llm: bad request")
)

func (r Request) validate() error {
	if len(r.Messages) == 0 {
		return fmt.Errorf("%w: no messages", ErrBadRequest)
	}
	images := 0
	for i, m := range r.Messages {
		switch m.Role {
		case "system", "user", "assistant":
		default:
			return fmt.Errorf("%w: message %d has role %q (system, user or assistant)", ErrBadRequest, i+1, m.Role)
		}
		if len(m.Images) > 0 && m.Role != "user" {
			return fmt.Errorf("%w: message %d (%s) has images: only user messages may", ErrBadRequest, i+1, m.Role)
		}
		for j, img := range m.Images {
			if ImageMIME("x."+strings.TrimPrefix(img.MIME, "image/")) != img.MIME || len(img.Data) == 0 || len(img.Data) > MaxImageBytes {
				return fmt.Errorf("%w: message %d image %d: %s of %d bytes (png, jpeg, gif or webp, 1 byte to %d)", ErrBadRequest, i+1, j+1,
					img.MIME, len(img.Data), MaxImageBytes)
			}
		}
		images += len(m.Images)
	}
	if images > MaxImages {
		return fmt.Errorf("%w: %d images, at most %d", ErrBadRequest, images, MaxImages)
	}
	if r.MaxTokens < 0 {
		return fmt.Errorf("%w: max_tokens %d", ErrBadRequest, r.MaxTokens)
	}
	return nil
}

// Defaults fills the model settings a request leaves unset (a run's
// run.yaml llm: section) before passing it on.
type Defaults struct {
	Client          Client
	Model           string
	Temperature     *float64
	MaxTokens       int
	ReasoningEffort string
}

// Chat implements Client.
func (d Defaults) Chat(ctx context.Context, req Request) (Response, error) {
	if req.Model == "" {
		req.Model = d.Model
	}
	if req.Temperature == nil {
		req.Temperature = d.Temperature
	}
	if req.MaxTokens == 0 {
		req.MaxTokens = d.MaxTokens
	}
	if req.ReasoningEffort == "" {
		req.ReasoningEffort = d.ReasoningEffort
	}
	return d.Client.Chat(ctx, req)
}

// ClientFunc adapts a function to a Client.
type ClientFunc func(ctx context.Context, req Request) (Response, error)

// Chat implements Client.
func (f ClientFunc) Chat(ctx context.Context, req Request) (Response, error) { return f(ctx, req) }

// StripFence removes one markdown code fence around a reply, if any (with
// its language tag; an unclosed fence, from a truncated reply, too).
func StripFence(s string) string {
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, "```") {
		return s
	}
	t = t[3:]
	if i := strings.IndexByte(t, '\n'); i >= 0 && !strings.ContainsAny(t[:i], "{[\"") {
		t = t[i+1:] // the fence's language tag
	}
	return strings.TrimSuffix(strings.TrimSpace(t), "```")
}
