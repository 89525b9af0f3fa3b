package llm

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// OpenAIOptions configure the openai backend. Zero values take the
// defaults in brackets.
type OpenAIOptions struct {
	// BaseURL of an OpenAI-compatible API (OPENAI_BASE_URL) [https://api.openai.com/v1]:
	// OpenAI, Azure OpenAI (the resource's endpoint), vLLM, Ollama,
	// llama.cpp server, LiteLLM, OpenRouter, ...
	BaseURL string
	// APIKey (OPENAI_API_KEY); some local servers need none.
	APIKey string
	// Model when a request names none (HPCQ_LLM_MODEL); on Azure, the
	// deployment's name.
	Model string
	// Endpoint is the kind of server [told from BaseURL].
	Endpoint Endpoint
	// APIVersion is Azure's api-version [2024-10-21; 2024-12-01-preview
	// for a reasoning model].
	APIVersion string
	// Serves is the model an Azure deployment (Model) serves, for its
	// price (HPCQ_LLM_SERVES); "" when Model is the model.
	Serves string
	// Reasoning overrides what the model's name says (llm.reasoning).
	Reasoning *bool
	// MaxTokensCap bounds the output limit a reply cut by reasoning is
	// asked again with (llm.max_tokens_cap) [4 times the request's].
	MaxTokensCap int
	// NoStream asks for whole replies (HPCQ_LLM_STREAM=false).
	NoStream bool
	// IdleTimeout bounds the wait for each chunk of a streamed reply (and
	// for its first, but for a reasoning model, which may think for
	// minutes before it says anything) [90s].
	IdleTimeout time.Duration
	// MaxAttempts per request, the first included [5].
	MaxAttempts int
	// Backoff before the second attempt, doubled for each next one, with
	// jitter, capped at MaxBackoff [1s, 30s]. A Retry-After from the server
	// wins (up to MaxBackoff).
	Backoff, MaxBackoff time.Duration
	// Timeout caps one attempt, streamed or not [20m]; an attempt that
	// reaches it is not made again.
	Timeout time.Duration
	// Concurrency bounds the requests in flight [4].
	Concurrency int
	Logger      *slog.Logger
	// HTTPClient [a client with a transport of its own].
	HTTPClient *http.Client
}

// OpenAI is the backend for OpenAI-compatible endpoints, through go-openai:
// requests shaped by the model's Profile, replies streamed, retried, and a
// refused configuration remembered (nothing more is sent).
type OpenAI struct {
	api      *openai.Client
	hc       *http.Client
	o        OpenAIOptions
	endpoint Endpoint
	sem      chan struct{}
	wait     func(context.Context, time.Duration) error
	// noStream: the endpoint refused a stream; replies are asked whole.
	noStream atomic.Bool
	// refused: the endpoint refused the configuration.
	refused  atomic.Pointer[ConfigError]
	profiles sync.Map // model -> Profile
	warned   sync.Map // a warning's text -> true: said once
}

// Defaults of OpenAIOptions.
const (
	DefaultTimeout     = 20 * time.Minute
	DefaultIdleTimeout = 90 * time.Second
	// AzureAPIVersion is Azure OpenAI's GA version; reasoning models need
	// AzureReasoningAPIVersion or later.
	AzureAPIVersion          = "2024-10-21"
	AzureReasoningAPIVersion = "2024-12-01-preview"
)

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
		o.Timeout = DefaultTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	endpoint := o.Endpoint
	if endpoint == "" {
		endpoint = DetectEndpoint(o.BaseURL)
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
	cfg := openai.DefaultConfig(o.APIKey)
	if endpoint == EndpointAzure {
		if o.APIVersion == "" {
			o.APIVersion = azureVersion(o)
		}
		// The resource's endpoint; go-openai adds /openai/deployments/<model>.
		cfg = openai.DefaultAzureConfig(o.APIKey, strings.TrimSuffix(base, "/openai"))
		cfg.APIVersion = o.APIVersion
		cfg.AzureModelMapperFunc = func(model string) string { return model } // the deployment is named by the model setting
	} else {
		cfg.BaseURL = base
	}
	cfg.HTTPClient = boundedDoer{hc: hc}
	return &OpenAI{api: openai.NewClientWithConfig(cfg), hc: hc, o: o, endpoint: endpoint, sem: make(chan struct{}, o.Concurrency), wait: sleep}, nil
}

// Profile is what a client of o sends to its model.
func (o OpenAIOptions) Profile() Profile {
	if o.Endpoint == EndpointAzure && o.APIVersion == "" {
		o.APIVersion = azureVersion(o)
	}
	return Resolve(o.Endpoint, o.Model, o.Reasoning, !o.NoStream, o.APIVersion)
}

// RunSettings are the run's own settings of the endpoint client
// (run.yaml's llm section).
type RunSettings struct {
	// Reasoning overrides what the model's name says (llm.reasoning).
	Reasoning *bool
	// MaxTokensCap bounds the limit a reply cut by reasoning is asked
	// again with (llm.max_tokens_cap).
	MaxTokensCap int
}

// azureVersion is the api-version a client of o asks Azure for when none
// is set.
func azureVersion(o OpenAIOptions) string {
	if IsReasoningModel(o.Model) || o.Reasoning != nil && *o.Reasoning {
		return AzureReasoningAPIVersion
	}
	return AzureAPIVersion
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

// Profile is what this client sends to model.
func (c *OpenAI) Profile(model string) Profile {
	if p, ok := c.profiles.Load(model); ok {
		return p.(Profile)
	}
	p := Resolve(c.endpoint, model, c.o.Reasoning, !c.o.NoStream, c.o.APIVersion)
	c.profiles.Store(model, p)
	return p
}

// Streaming reports whether replies are streamed now (not after the
// endpoint refused a stream).
func (c *OpenAI) Streaming() bool { return !c.o.NoStream && !c.noStream.Load() }

// maxReasoningRounds bounds how often a reply cut by reasoning is asked
// again with a larger limit or a lower effort.
const maxReasoningRounds = 3

// Chat sends the request, retrying what is retryable. A reasoning model's
// reply cut at its output limit with nothing said (every token spent on
// reasoning) is asked again with twice the limit (up to MaxTokensCap), then
// with a lower effort; the usage of every round is in the response, and
// its Note says what happened.
func (c *OpenAI) Chat(ctx context.Context, req Request) (Response, error) {
	if err := req.validate(); err != nil {
		return Response{}, err
	}
	model := req.Model
	if model == "" {
		model = c.o.Model
	}
	if ce := c.refused.Load(); ce != nil {
		return Response{}, fmt.Errorf("llm: %s: not sent, %w", model, ce)
	}
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return Response{}, ctx.Err()
	}
	defer func() { <-c.sem }()
	p := c.Profile(model)
	if !p.Temperature && req.Temperature != nil {
		c.warnOnce(fmt.Sprintf("llm: temperature %g not sent to %s: a reasoning model takes only its default", *req.Temperature, model))
	}
	start := time.Now()
	limit, effort := req.MaxTokens, req.ReasoningEffort
	capTokens := c.o.MaxTokensCap
	if capTokens <= 0 {
		capTokens = 4 * req.MaxTokens
	}
	var total Response
	var notes []string
	grown := false
	for round := 0; ; round++ {
		resp, err := c.retrying(ctx, p, c.request(p, req, limit, effort), req.Purpose)
		total.add(resp)
		if err != nil {
			total.Latency, total.Note = time.Since(start), strings.Join(notes, "; ")
			return total, err
		}
		resp.Limit, resp.Requested, resp.Serves = limit, model, c.o.Serves
		cut := p.Reasoning && reasoningCut(resp)
		if !cut && resp.FinishReason == FinishLength && !grown && c.o.MaxTokensCap > limit && limit > 0 {
			// A reply cut with words said: asked again once with a larger
			// limit, where llm.max_tokens_cap says the model takes one.
			grown = true
			notes = append(notes, fmt.Sprintf("the reply was cut at %s %d (%d tokens); asked again with %d", p.TokenField, limit,
				resp.TokensOut, min(2*limit, c.o.MaxTokensCap)))
			limit = min(2*limit, c.o.MaxTokensCap)
			c.o.Logger.Warn("llm reply cut at its output limit", "model", model, "purpose", req.Purpose, "node", req.Node, "what", notes[len(notes)-1])
			continue
		}
		if cut {
			note := fmt.Sprintf("the model spent all %d completion tokens on reasoning", resp.TokensOut)
			switch {
			case round == maxReasoningRounds:
				note += "; not asked again"
				cut = false
			case limit > 0 && limit < capTokens:
				limit = min(2*limit, capTokens)
				note += fmt.Sprintf("; asked again with %s %d", p.TokenField, limit)
			case lowerEffort(effort) != "":
				effort = lowerEffort(effort)
				note += "; asked again with reasoning_effort " + effort
			default:
				note += fmt.Sprintf("; no larger limit (llm.max_tokens_cap %d) or lower effort to ask with", capTokens)
				cut = false
			}
			notes = append(notes, note)
			c.o.Logger.Warn("llm reply cut by reasoning", "model", model, "purpose", req.Purpose, "node", req.Node, "what", note)
		}
		if !cut {
			resp.TokensIn, resp.TokensOut, resp.ReasoningTokens, resp.CachedTokens = total.TokensIn, total.TokensOut, total.ReasoningTokens, total.CachedTokens
			resp.UsageEstimated = total.UsageEstimated
			resp.Latency, resp.Note = time.Since(start), strings.Join(notes, "; ")
			return resp, nil
		}
	}
}

// reasoningCut: a reply that reached its output limit with nothing said.
func reasoningCut(r Response) bool {
	return r.FinishReason == "length" && strings.TrimSpace(r.Content) == ""
}

// retrying makes the attempts of one request.
func (c *OpenAI) retrying(ctx context.Context, p Profile, creq openai.ChatCompletionRequest, purpose string) (Response, error) {
	var last error
	for attempt := 1; attempt <= c.o.MaxAttempts; attempt++ {
		stream := c.Streaming()
		resp, retryAfter, err := c.attempt(ctx, p, creq, stream)
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			return Response{}, fmt.Errorf("llm: %s: %w", p.Model, ctx.Err())
		}
		if stream && streamRefused(err) {
			// Said once, by whichever request saw it first; every request
			// refused so is asked again whole.
			if c.noStream.CompareAndSwap(false, true) {
				c.o.Logger.Warn("llm: the endpoint refused a streamed reply; replies are asked whole from now on", "model", p.Model, "err", err)
			}
			attempt-- // not the request's failure
			continue
		}
		if ce := asConfigError(err); ce != nil {
			c.refused.CompareAndSwap(nil, ce)
			return Response{}, fmt.Errorf("llm: %s: %w", p.Model, ce)
		}
		if !retryable(err) {
			return Response{}, fmt.Errorf("llm: %s: %w", p.Model, err)
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
		c.o.Logger.Warn("llm request failed; retrying", "model", p.Model, "purpose", purpose, "attempt", attempt, "in", d, "err", err)
		if err := c.wait(ctx, d); err != nil {
			return Response{}, fmt.Errorf("llm: %s: %w", p.Model, err)
		}
	}
	if c.o.MaxAttempts == 1 { // a probe, or HPCQ_LLM_MAX_ATTEMPTS=1: nothing was retried
		return Response{}, &endpointError{err: last, msg: fmt.Sprintf("llm: %s: its one attempt failed (not retried): %v", p.Model, last),
			kind: ErrRetriesExhausted}
	}
	return Response{}, fmt.Errorf("%w after %d attempts (%s): %w", ErrRetriesExhausted, c.o.MaxAttempts, p.Model, last)
}

// request is req as go-openai sends it to the profile's model, with the
// output limit and effort of this round.
func (c *OpenAI) request(p Profile, req Request, limit int, effort string) openai.ChatCompletionRequest {
	creq := openai.ChatCompletionRequest{Model: p.Model, Messages: make([]openai.ChatCompletionMessage, len(req.Messages))}
	for i, m := range req.Messages {
		cm := openai.ChatCompletionMessage{Role: m.Role, Content: m.Content}
		if len(m.Images) > 0 {
			cm.Content = ""
			cm.MultiContent = append(make([]openai.ChatMessagePart, 0, 1+len(m.Images)), openai.ChatMessagePart{Type: openai.ChatMessagePartTypeText, Text: m.Content})
			for _, img := range m.Images {
				cm.MultiContent = append(cm.MultiContent, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{
					URL: "data:" + img.MIME + ";base64," + base64.StdEncoding.EncodeToString(img.Data), Detail: openai.ImageURLDetailAuto}})
			}
		}
		creq.Messages[i] = cm
	}
	if limit > 0 {
		if p.TokenField == "max_completion_tokens" {
			creq.MaxCompletionTokens = limit
		} else {
			creq.MaxTokens = limit //nolint:staticcheck // max_tokens is what chat models and vLLM, Ollama, llama.cpp take
		}
	}
	if p.Temperature && req.Temperature != nil {
		// go-openai leaves out a temperature of 0 (omitempty): its
		// documented way to send one is the smallest float32 above it,
		// which the endpoint reads as 0 for every purpose (1e-45).
		t := float32(*req.Temperature)
		if t == 0 {
			t = math.SmallestNonzeroFloat32
		}
		creq.Temperature = t
	}
	if p.Effort {
		creq.ReasoningEffort = effort
	}
	if req.JSON {
		creq.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject}
	}
	return creq
}

type retryAfterKey struct{}

// attempt sends the request once; retryAfter is the server's Retry-After,
// if it gave one.
func (c *OpenAI) attempt(ctx context.Context, p Profile, creq openai.ChatCompletionRequest, stream bool) (resp Response, retryAfter time.Duration, err error) {
	actx, cancel := context.WithTimeoutCause(ctx, c.o.Timeout, fmt.Errorf("%w (%s, HPCQ_LLM_TIMEOUT)", errAttemptCap, c.o.Timeout))
	defer cancel()
	actx = context.WithValue(actx, retryAfterKey{}, &retryAfter)
	if stream {
		resp, err = c.stream(actx, p, creq)
	} else {
		resp, err = c.whole(actx, creq)
	}
	err = describe(withCause(ctx, actx, err))
	return resp, retryAfter, err
}

// whole asks for the reply in one answer.
func (c *OpenAI) whole(ctx context.Context, creq openai.ChatCompletionRequest) (Response, error) {
	r, err := c.api.CreateChatCompletion(ctx, creq)
	if err != nil {
		return Response{}, answerError(err)
	}
	if len(r.Choices) == 0 {
		return Response{}, errEmptyReply
	}
	ch := r.Choices[0]
	resp := Response{Content: ch.Message.Content, Model: r.Model, FinishReason: string(ch.FinishReason), Refusal: ch.Message.Refusal,
		Filter: filterCategories(ch.ContentFilterResults)}
	if u := r.Usage; u.PromptTokens == 0 && u.CompletionTokens == 0 && u.TotalTokens == 0 {
		estimateUsage(&resp, creq) // no usage in the answer
	} else {
		resp.setUsage(&r.Usage)
	}
	return resp, nil
}

// withCause is err, saying why inner ended (a cap or an idle timeout)
// when it ended before outer did and err does not say it already.
func withCause(outer, inner context.Context, err error) error {
	cause := context.Cause(inner)
	if err == nil || outer.Err() != nil || cause == nil || errors.Is(err, cause) {
		return err
	}
	if errors.Is(cause, errAttemptCap) || errors.Is(cause, errIdle) {
		return fmt.Errorf("%w: %w", cause, err)
	}
	return err
}

// answerError makes a body that is not JSON an errNotCompletion.
func answerError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syntax) || errors.As(err, &typ) {
		return fmt.Errorf("%w: %w", errNotCompletion, err)
	}
	return err
}

// warnOnce logs msg the first time.
func (c *OpenAI) warnOnce(msg string) {
	if _, said := c.warned.LoadOrStore(msg, true); !said {
		c.o.Logger.Warn(msg)
	}
}

// ReasoningSpent says why a reply is empty when a reasoning model spent
// its whole output limit thinking ("" for any other reply): the reason a
// node that got no usable reply is given.
func ReasoningSpent(r Response) string {
	if !reasoningCut(r) || r.ReasoningTokens == 0 {
		return ""
	}
	s := fmt.Sprintf("the model spent its completion tokens on reasoning and wrote nothing (%d reasoning tokens", r.ReasoningTokens)
	if r.Note != "" {
		s += "; " + r.Note
	}
	return s + ")"
}
