package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/chatsse"
	"github.com/hpcq/hpcq/internal/testutil"
)

// rawServer answers each request with answer(n, body), counting requests.
func rawServer(t *testing.T, answer func(n int64, body map[string]any, w http.ResponseWriter)) (*httptest.Server, *atomic.Int64, *[]map[string]any) {
	var calls atomic.Int64
	var bodies []map[string]any
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		bodies = append(bodies, body)
		mu.Unlock()
		answer(n, body, w)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls, &bodies
}

func newClient(t *testing.T, url string, o OpenAIOptions) *OpenAI {
	t.Helper()
	o.BaseURL, o.Logger = url, testutil.Logger(t)
	if o.Model == "" {
		o.Model = "m"
	}
	c, err := NewOpenAI(o)
	require.NoError(t, err)
	c.wait = func(ctx context.Context, d time.Duration) error { return ctx.Err() }
	return c
}

// TestEmptyReplyCutByReasoning: the real answer gpt-5.2 gave when its
// whole limit went to reasoning (empty content, finish_reason length, 8192
// of 8192 completion tokens reasoning) is asked again with twice the limit,
// and its usage is counted with the second answer's.
func TestEmptyReplyCutByReasoning(t *testing.T) {
	t.Parallel()
	fixture, err := os.ReadFile("testdata/gpt-5.2-empty-reply.json")
	require.NoError(t, err)
	srv, calls, bodies := rawServer(t, func(n int64, _ map[string]any, w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		if n == 1 {
			_, _ = w.Write(fixture) // a whole completion to a stream request: read as its one chunk
			return
		}
		chatsse.Write(w, chatsse.Reply{ID: "c2", Model: "gpt-5.2-2025-12-11", Content: "the answer", FinishReason: "stop",
			Usage: map[string]any{"prompt_tokens": 51587, "completion_tokens": 3000, "completion_tokens_details": map[string]int{"reasoning_tokens": 2500}}})
	})
	c := newClient(t, srv.URL, OpenAIOptions{Model: "gpt-5.2", MaxTokensCap: 32768})
	req := ask("x")
	req.MaxTokens = 8192
	resp, err := c.Chat(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, "the answer", resp.Content)
	require.EqualValues(t, 2, calls.Load())
	require.EqualValues(t, 8192, (*bodies)[0]["max_completion_tokens"])
	require.EqualValues(t, 16384, (*bodies)[1]["max_completion_tokens"])
	require.Equal(t, 2*51587, resp.TokensIn, "both rounds are billed")
	require.Equal(t, 8192+3000, resp.TokensOut)
	require.Equal(t, 8192+2500, resp.ReasoningTokens)
	require.Equal(t, 29312, resp.CachedTokens)
	require.Equal(t, "the model spent all 8192 completion tokens on reasoning; asked again with max_completion_tokens 16384", resp.Note)

	// At the cap, a lower effort; with none lower, the empty reply and why.
	*bodies = nil
	srv2, _, bodies2 := rawServer(t, func(n int64, _ map[string]any, w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(fixture)
	})
	c = newClient(t, srv2.URL, OpenAIOptions{Model: "gpt-5.2", MaxTokensCap: 8192})
	req.ReasoningEffort = "low"
	resp, err = c.Chat(context.Background(), req)
	require.NoError(t, err)
	require.Len(t, *bodies2, 2)
	require.Equal(t, "minimal", (*bodies2)[1]["reasoning_effort"])
	require.Empty(t, resp.Content)
	require.Equal(t, "length", resp.FinishReason)
	require.Contains(t, resp.Note, "asked again with reasoning_effort minimal; the model spent all 8192 completion tokens on reasoning; no larger limit (llm.max_tokens_cap 8192) or lower effort")
	require.Contains(t, ReasoningSpent(resp), "the model spent its completion tokens on reasoning and wrote nothing (16384 reasoning tokens")
}

// TestReasoningRequest: a reasoning model gets max_completion_tokens, no
// temperature, its reasoning_effort, a stream with usage; a chat model
// max_tokens and a temperature of 0 as 1e-45 (go-openai's documented way
// past its omitempty).
func TestReasoningRequest(t *testing.T) {
	t.Parallel()
	var raw []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		_, _ = fmt.Fprint(&b, readAll(r))
		raw = append(raw, b.String())
		chatsse.Write(w, chatsse.Reply{ID: "c", Model: "x", Content: "ok", FinishReason: "stop",
			Usage: map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "prompt_tokens_details": map[string]int{"cached_tokens": 4}}})
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, OpenAIOptions{Model: "o4-mini"})
	temp := 0.7
	req := ask("x")
	req.Temperature, req.MaxTokens, req.ReasoningEffort, req.JSON = &temp, 4000, "high", true
	resp, err := c.Chat(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, 4, resp.CachedTokens)
	var body map[string]any
	require.NoError(t, json.Unmarshal([]byte(raw[0]), &body))
	require.EqualValues(t, 4000, body["max_completion_tokens"])
	require.NotContains(t, body, "max_tokens")
	require.NotContains(t, body, "temperature")
	require.Equal(t, "high", body["reasoning_effort"])
	require.Equal(t, true, body["stream"])
	require.Equal(t, map[string]any{"include_usage": true}, body["stream_options"])
	require.Equal(t, map[string]any{"type": "json_object"}, body["response_format"])

	c = newClient(t, srv.URL, OpenAIOptions{Model: "gpt-4o-mini"})
	zero := 0.0
	req.Temperature = &zero
	_, err = c.Chat(context.Background(), req)
	require.NoError(t, err)
	require.Contains(t, raw[1], `"temperature":1e-45`)
	require.Contains(t, raw[1], `"max_tokens":4000`)
	require.NotContains(t, raw[1], "reasoning_effort")

	// llm.reasoning: true makes a model of another name a reasoning model.
	on := true
	c = newClient(t, srv.URL, OpenAIOptions{Model: "my-r1", Reasoning: &on})
	_, err = c.Chat(context.Background(), req)
	require.NoError(t, err)
	require.Contains(t, raw[2], `"max_completion_tokens":4000`)
	require.NotContains(t, raw[2], `"temperature"`)

	// go-openai checks reasoning models by name itself: llm.reasoning:
	// false on such a name is refused before anything is sent, as a
	// configuration error that says so.
	off := false
	c = newClient(t, srv.URL, OpenAIOptions{Model: "o4-mini", Reasoning: &off})
	_, err = c.Chat(context.Background(), req)
	require.ErrorIs(t, err, ErrConfig)
	require.ErrorContains(t, err, "go-openai refused it before sending")
	require.Len(t, raw, 3)
}

func readAll(r *http.Request) string {
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

// TestStreamCutAndIdle: a stream that stops before its finish_reason, or
// sends nothing for longer than the idle timeout, is retried; an attempt
// that reaches its cap is not.
func TestStreamCutAndIdle(t *testing.T) {
	t.Parallel()
	srv, calls, _ := rawServer(t, func(n int64, _ map[string]any, w http.ResponseWriter) {
		switch n {
		case 1:
			chatsse.Write(w, chatsse.Reply{ID: "c", Model: "m", Content: "half of it"}) // no finish_reason
		case 2:
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"slow"}}]}`+"\n\n")
			w.(http.Flusher).Flush()
			time.Sleep(time.Second) //nolint:forbidigo // a slow stream: the pause is the test
		default:
			chatsse.Write(w, chatsse.Reply{ID: "c", Model: "m", Content: "whole", FinishReason: "stop", Usage: map[string]int{"prompt_tokens": 1, "completion_tokens": 1}})
		}
	})
	c := newClient(t, srv.URL, OpenAIOptions{IdleTimeout: 200 * time.Millisecond})
	resp, err := c.Chat(context.Background(), ask("x"))
	require.NoError(t, err)
	require.Equal(t, "whole", resp.Content)
	require.EqualValues(t, 3, calls.Load())

	slow, slowCalls, _ := rawServer(t, func(int64, map[string]any, http.ResponseWriter) { time.Sleep(time.Second) }) //nolint:forbidigo // a slow endpoint: the pause is the test
	c = newClient(t, slow.URL, OpenAIOptions{Timeout: 200 * time.Millisecond})
	_, err = c.Chat(context.Background(), ask("x"))
	require.ErrorIs(t, err, errAttemptCap)
	require.ErrorContains(t, err, "HPCQ_LLM_TIMEOUT")
	require.EqualValues(t, 1, slowCalls.Load(), "a capped attempt is not made again")
}

// TestUsageEstimated: a stream without usage gets its tokens counted here,
// marked estimated.
func TestUsageEstimated(t *testing.T) {
	t.Parallel()
	srv, _, _ := rawServer(t, func(_ int64, _ map[string]any, w http.ResponseWriter) {
		chatsse.Write(w, chatsse.Reply{ID: "c", Model: "m", Content: "hello there, world", FinishReason: "stop"})
	})
	resp, err := newClient(t, srv.URL, OpenAIOptions{}).Chat(context.Background(), ask("count these words please"))
	require.NoError(t, err)
	require.True(t, resp.UsageEstimated)
	require.Greater(t, resp.TokensIn, 10)
	require.Equal(t, 4, resp.TokensOut)
}

// TestAnswers: error answers of several servers' shapes, and what each
// becomes: OpenAI's (string code, param), vLLM's (numeric code), a proxy's
// page, a body too large; the configuration's refusals are ErrConfig.
func TestAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, ct, body string
		status         int
		want           string
		config, retry  bool
	}{
		{"unsupported", "application/json", `{"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this model.", "type": "invalid_request_error", "param": "max_tokens", "code": "unsupported_parameter"}}`,
			400, "the endpoint refused the configuration (status 400 unsupported_parameter, parameter max_tokens): Unsupported parameter: 'max_tokens'", true, false},
		{"context", "application/json", `{"error": {"message": "This model's maximum context length is 128000 tokens.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}`,
			400, "maximum context length", false, false},
		{"key", "application/json", `{"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}}`,
			401, "status 401 invalid_api_key", true, false},
		{"model", "application/json", `{"object": "error", "message": "The model does not exist.", "type": "NotFoundError", "param": null, "code": 404}`,
			404, "status 404", true, false},
		{"vllm parameter", "application/json", `{"object": "error", "message": "Unsupported parameter: 'reasoning_effort'", "type": "BadRequestError", "param": null, "code": 400}`,
			400, "the endpoint refused the configuration (status 400 400): Unsupported parameter", true, false},
		{"vllm busy", "application/json", `{"error": {"message": "busy", "code": 503}}`, 503, "busy", false, true},
		{"quota", "application/json", `{"error": {"message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota"}}`,
			429, "exceeded your current quota", true, false},
		{"gateway", "text/html", "<html>\n<body>Bad gateway</body>\n</html>", 502, "Bad gateway", false, true},
		{"portal", "text/html", "<html>log in</html>", 200, "not a chat completion", false, true},
	} {
		srv, _, _ := rawServer(t, func(int64, map[string]any, http.ResponseWriter) {})
		srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", tc.ct)
			w.WriteHeader(tc.status)
			fmt.Fprint(w, tc.body)
		})
		c := newClient(t, srv.URL, OpenAIOptions{MaxAttempts: 1})
		_, err := c.Chat(context.Background(), ask("x"))
		require.ErrorContains(t, err, tc.want, tc.name)
		require.Equal(t, tc.config, errors.Is(err, ErrConfig), tc.name)
		if !tc.config {
			require.Equal(t, tc.retry, errors.Is(err, ErrRetriesExhausted), tc.name)
		}
	}
}

// TestBadRequestOfTheContent: a 400 that names no setting is that
// request's fault, even as the first of a process (a resumed run's first
// request is one it must send again): not retried, nothing latched.
func TestBadRequestOfTheContent(t *testing.T) {
	t.Parallel()
	srv, calls, _ := rawServer(t, func(n int64, _ map[string]any, w http.ResponseWriter) {
		if n == 2 {
			chatsse.Write(w, chatsse.Reply{ID: "c", Model: "m", Content: "fine", FinishReason: "stop", Usage: map[string]int{"prompt_tokens": 1, "completion_tokens": 1}})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		fmt.Fprint(w, `{"error": {"message": "Invalid prompt: your prompt was flagged", "type": "invalid_request_error", "param": null, "code": null}}`)
	})
	c := newClient(t, srv.URL, OpenAIOptions{})
	_, err := c.Chat(context.Background(), ask("x"))
	require.NotErrorIs(t, err, ErrConfig)
	require.ErrorContains(t, err, "status 400 Bad Request (invalid_request_error): Invalid prompt")
	var apiErr *openai.APIError
	require.ErrorAs(t, err, &apiErr, "go-openai's typed error is found through hpcq's")
	require.Equal(t, 400, apiErr.HTTPStatusCode)
	_, err = c.Chat(context.Background(), ask("x"))
	require.NoError(t, err)
	require.EqualValues(t, 2, calls.Load())
}

// TestConfigRefusalLatched: after the endpoint refused the configuration,
// nothing more is sent; the error says why at once.
func TestConfigRefusalLatched(t *testing.T) {
	t.Parallel()
	srv, calls, _ := rawServer(t, func(_ int64, _ map[string]any, w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(401)
		fmt.Fprint(w, `{"error": {"message": "Incorrect API key provided: sk-te*****", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}}`)
	})
	c := newClient(t, srv.URL, OpenAIOptions{})
	for range 3 {
		_, err := c.Chat(context.Background(), ask("x"))
		require.ErrorIs(t, err, ErrConfig)
		require.ErrorContains(t, err, "Incorrect API key provided")
	}
	require.EqualValues(t, 1, calls.Load())
}

// TestStreamRefused: an endpoint that refuses streams (OpenAI, for an
// organization not verified for the model) is asked again without one, at
// once, and never streamed to again.
func TestStreamRefused(t *testing.T) {
	t.Parallel()
	srv, calls, bodies := rawServer(t, func(_ int64, body map[string]any, w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		if body["stream"] == true {
			time.Sleep(20 * time.Millisecond) //nolint:forbidigo // the concurrent requests are all in flight
			w.WriteHeader(400)
			fmt.Fprint(w, `{"error": {"message": "Your organization must be verified to stream this model.", "type": "invalid_request_error", "param": "stream", "code": "unsupported_value"}}`)
			return
		}
		fmt.Fprint(w, `{"id": "c", "object": "chat.completion", "model": "o3", "choices": [{"index": 0, "message": {"role": "assistant", "content": "whole"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}`)
	})
	c := newClient(t, srv.URL, OpenAIOptions{Model: "o3"})
	for range 2 {
		resp, err := c.Chat(context.Background(), ask("x"))
		require.NoError(t, err)
		require.Equal(t, "whole", resp.Content)
	}
	require.EqualValues(t, 3, calls.Load())
	require.False(t, c.Streaming())
	require.NotContains(t, (*bodies)[1], "stream_options")

	// Requests in flight together when the refusals come are all asked
	// again whole: none takes the refusal for the configuration's.
	c = newClient(t, srv.URL, OpenAIOptions{Model: "o3", Concurrency: 4})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			resp, err := c.Chat(context.Background(), ask("x"))
			require.NoError(t, err)
			require.Equal(t, "whole", resp.Content)
		})
	}
	wg.Wait()
}

// FuzzAnswer: whatever an endpoint answers, streamed or not, the client
// gives a completion or an error of a known kind, in valid UTF-8.
func FuzzAnswer(f *testing.F) {
	for _, s := range []struct {
		status int
		ct     string
		body   string
	}{
		{200, "application/json", `{"model": "m", "choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 1, "completion_tokens": 2}}`},
		{200, "application/json", `{"choices": []}`},
		{200, "text/event-stream", "data: {\"choices\": [{\"index\": 0, \"delta\": {\"content\": \"a\"}, \"finish_reason\": \"stop\"}]}\n\ndata: [DONE]\n\n"},
		{200, "text/event-stream", "data: {\"error\": {\"message\": \"overloaded\"}}\n\n"},
		{200, "text/event-stream", ": keep-alive\n\ndata: {\"choices\": [{\"index\": 0, \"delta\": {\"content\": \"\xff\"}}]}\n\n"},
		{200, "text/html", `<html>log in</html>`},
		{429, "application/json", `{"error": {"message": "slow down", "type": "rate_limit", "code": "rate_limit_exceeded"}}`},
		{400, "application/json", `{"error": {"message": "bad", "param": "temperature", "code": "unsupported_value"}}`},
		{500, "", "\xff\xfe internal"},
		{404, "application/json", `{"error": "not found"}`},
	} {
		f.Add(s.status, s.ct, []byte(s.body), true)
		f.Add(s.status, s.ct, []byte(s.body), false)
	}
	var cur atomic.Pointer[[3]any]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := *cur.Load()
		w.Header().Set("Content-Type", a[1].(string))
		w.WriteHeader(a[0].(int))
		_, _ = w.Write(a[2].([]byte))
	}))
	defer srv.Close()
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	f.Fuzz(func(t *testing.T, status int, ct string, body []byte, stream bool) {
		if status < 200 || status > 599 || strings.ContainsAny(ct, "\r\n\x00") || !utf8.ValidString(ct) {
			return
		}
		cur.Store(&[3]any{status, ct, body})
		c, err := NewOpenAI(OpenAIOptions{BaseURL: srv.URL, Model: "m", MaxAttempts: 1, NoStream: !stream, IdleTimeout: time.Second, Timeout: 2 * time.Second,
			HTTPClient: hc, Logger: testutil.Logger(t)})
		require.NoError(t, err)
		resp, err := c.Chat(context.Background(), ask("x"))
		if err == nil {
			if status/100 != 2 {
				t.Fatalf("a completion from status %d: %#v", status, resp)
			}
			return
		}
		if !utf8.ValidString(err.Error()) {
			t.Fatalf("the error is not valid UTF-8: %q", err.Error())
		}
	})
}
