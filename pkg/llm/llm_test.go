package llm

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/chatsse"
	"github.com/hpcq/hpcq/internal/testutil"
)

// fakeOpenAI is an httptest server speaking the chat completions API; each
// request goes to handle, which returns a status, headers and a reply text
// (or a raw body).
type fakeOpenAI struct {
	*httptest.Server
	mu       sync.Mutex
	bodies   []map[string]any
	calls    atomic.Int64
	inFlight atomic.Int64
	maxIn    atomic.Int64
	handle   func(n int64, body map[string]any) (status int, header map[string]string, reply string, delay time.Duration)
}

func newFake(t *testing.T, handle func(n int64, body map[string]any) (int, map[string]string, string, time.Duration), configure ...func(*http.Server)) *fakeOpenAI {
	f := &fakeOpenAI{handle: handle}
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := f.calls.Add(1)
		cur := f.inFlight.Add(1)
		defer f.inFlight.Add(-1)
		for {
			m := f.maxIn.Load()
			if cur <= m || f.maxIn.CompareAndSwap(m, cur) {
				break
			}
		}
		if r.URL.Path != "/v1/chat/completions" {
			http.Error(w, "not found: "+r.URL.Path, http.StatusNotFound)
			return
		}
		var body map[string]any
		data, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(data, &body)
		f.mu.Lock()
		f.bodies = append(f.bodies, body)
		f.mu.Unlock()
		status, hdr, reply, delay := f.handle(n, body)
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		for k, v := range hdr {
			w.Header().Set(k, v)
		}
		if status != http.StatusOK {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"error": {"message": %q, "type": "server_error"}}`, reply)
			return
		}
		stream, _ := body["stream"].(bool)
		if stream && reply == "<no choices>" {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: [DONE]\n\n")
			return
		}
		if stream {
			chatsse.Write(w, chatsse.Reply{ID: fmt.Sprintf("c%d", n), Model: fmt.Sprint(body["model"]), Content: reply, FinishReason: "stop",
				Usage: map[string]any{"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if reply == "<no choices>" {
			fmt.Fprint(w, `{"id": "x", "object": "chat.completion", "model": "m", "choices": []}`)
			return
		}
		out, _ := json.Marshal(map[string]any{
			"id": fmt.Sprintf("c%d", n), "object": "chat.completion", "created": 1, "model": body["model"],
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": reply}, "finish_reason": "stop"}},
			"usage":   map[string]any{"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
		})
		_, _ = w.Write(out)
	}))
	for _, c := range configure {
		c(f.Config)
	}
	f.Start()
	t.Cleanup(f.Close)
	return f
}

// client is an OpenAI backend on f whose waits are recorded, not slept.
func client(t *testing.T, f *fakeOpenAI, o OpenAIOptions) (*OpenAI, *[]time.Duration) {
	t.Helper()
	o.BaseURL, o.APIKey, o.Logger = f.URL+"/v1", "sk-test", testutil.Logger(t)
	if o.Model == "" {
		o.Model = "test-model"
	}
	c, err := NewOpenAI(o)
	require.NoError(t, err)
	var waits []time.Duration
	var mu sync.Mutex
	c.wait = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
		return ctx.Err()
	}
	return c, &waits
}

func ask(text string) Request {
	return Request{Messages: []Message{{Role: "system", Content: "You write HPC code."}, {Role: "user", Content: text}}, Purpose: "draft", Node: "n1"}
}

func TestChat(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(int64, map[string]any) (int, map[string]string, string, time.Duration) {
		return 200, nil, `{"plan": "tile the loop"}`, 0
	})
	c, waits := client(t, f, OpenAIOptions{})
	temp := 0.2
	req := ask("stencil")
	req.JSON, req.Temperature, req.MaxTokens = true, &temp, 500
	resp, err := c.Chat(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, `{"plan": "tile the loop"}`, resp.Content)
	require.Equal(t, "test-model", resp.Model)
	require.Equal(t, 100, resp.TokensIn)
	require.Equal(t, 20, resp.TokensOut)
	require.Equal(t, "stop", resp.FinishReason)
	require.Empty(t, *waits)
	body := f.bodies[0]
	require.Equal(t, "test-model", body["model"])
	require.Equal(t, map[string]any{"type": "json_object"}, body["response_format"])
	require.InDelta(t, 0.2, body["temperature"], 1e-6)
	require.EqualValues(t, 500, body["max_tokens"])
	require.Len(t, body["messages"], 2)

	req = ask("other")
	req.Model = "big-model"
	_, err = c.Chat(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, "big-model", f.bodies[1]["model"])
}

// TestTemperatureZeroIsSent: a temperature of 0 (what makes a reply
// reproducible, and cacheable) reaches the endpoint as 0, not left out
// (which would give the endpoint's default, 1 for OpenAI); no temperature
// is left out.
func TestTemperatureZeroIsSent(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(int64, map[string]any) (int, map[string]string, string, time.Duration) { return 200, nil, "x", 0 })
	c, _ := client(t, f, OpenAIOptions{})
	zero := 0.0
	req := ask("x")
	req.Temperature = &zero
	_, err := c.Chat(context.Background(), req)
	require.NoError(t, err)
	temp, ok := f.bodies[0]["temperature"]
	require.True(t, ok, "temperature 0 is sent")
	require.InDelta(t, 0, temp, 1e-40)
	_, err = c.Chat(context.Background(), ask("x"))
	require.NoError(t, err)
	require.NotContains(t, f.bodies[1], "temperature", "none asked: the endpoint's default")
	require.NotContains(t, f.bodies[1], "max_tokens")
	require.NotContains(t, f.bodies[1], "response_format")
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(int64, map[string]any) (int, map[string]string, string, time.Duration) { return 200, nil, "x", 0 })
	c, _ := client(t, f, OpenAIOptions{})
	_, err := c.Chat(context.Background(), Request{})
	require.ErrorIs(t, err, ErrBadRequest)
	_, err = c.Chat(context.Background(), Request{Messages: []Message{{Role: "wizard", Content: "x"}}})
	require.ErrorIs(t, err, ErrBadRequest)
	require.Zero(t, f.calls.Load(), "nothing is sent")
	_, err = NewOpenAI(OpenAIOptions{BaseURL: f.URL})
	require.ErrorContains(t, err, "HPCQ_LLM_MODEL")
}

// Test429RetryAfter: a 429 with Retry-After is retried after the time the
// server asked for.
func Test429RetryAfter(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(n int64, _ map[string]any) (int, map[string]string, string, time.Duration) {
		if n < 3 {
			return 429, map[string]string{"Retry-After": "7"}, "rate limited", 0
		}
		return 200, nil, "done", 0
	})
	c, waits := client(t, f, OpenAIOptions{Backoff: 10 * time.Millisecond})
	resp, err := c.Chat(context.Background(), ask("x"))
	require.NoError(t, err)
	require.Equal(t, "done", resp.Content)
	require.EqualValues(t, 3, f.calls.Load())
	require.Equal(t, []time.Duration{7 * time.Second, 7 * time.Second}, *waits)
}

// TestServerErrorsExhaust: 5xx are retried with growing, jittered backoff,
// up to MaxAttempts; then the error says so.
func TestServerErrorsExhaust(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(int64, map[string]any) (int, map[string]string, string, time.Duration) {
		return 503, nil, "overloaded", 0
	})
	c, waits := client(t, f, OpenAIOptions{MaxAttempts: 4, Backoff: 100 * time.Millisecond, MaxBackoff: 300 * time.Millisecond})
	_, err := c.Chat(context.Background(), ask("x"))
	require.ErrorIs(t, err, ErrRetriesExhausted)
	require.ErrorContains(t, err, "overloaded")
	require.EqualValues(t, 4, f.calls.Load())
	require.Len(t, *waits, 3)
	for i, w := range *waits {
		lo := (100 * time.Millisecond << i) / 2
		require.GreaterOrEqual(t, w, min(lo, 300*time.Millisecond), "wait %d", i)
		require.LessOrEqual(t, w, 300*time.Millisecond, "capped")
	}
}

func TestClientErrorsAreNotRetried(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(int64, map[string]any) (int, map[string]string, string, time.Duration) {
		return 400, nil, "context length exceeded", 0
	})
	c, waits := client(t, f, OpenAIOptions{})
	_, err := c.Chat(context.Background(), ask("x"))
	require.ErrorContains(t, err, "context length exceeded")
	require.NotErrorIs(t, err, ErrRetriesExhausted)
	require.EqualValues(t, 1, f.calls.Load())
	require.Empty(t, *waits)
}

// TestTimeout: an attempt whose first chunk takes longer than IdleTimeout
// is abandoned and retried; the caller's own deadline ends everything.
func TestTimeout(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(n int64, _ map[string]any) (int, map[string]string, string, time.Duration) {
		if n == 1 {
			return 200, nil, "late", 2 * time.Second
		}
		return 200, nil, "on time", 0
	})
	c, _ := client(t, f, OpenAIOptions{IdleTimeout: 100 * time.Millisecond})
	resp, err := c.Chat(context.Background(), ask("x"))
	require.NoError(t, err)
	require.Equal(t, "on time", resp.Content)

	slow := newFake(t, func(int64, map[string]any) (int, map[string]string, string, time.Duration) {
		return 200, nil, "late", 5 * time.Second
	})
	c, _ = client(t, slow, OpenAIOptions{Timeout: 3 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, err = c.Chat(ctx, ask("x"))
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestEmptyChoicesRetried(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(n int64, _ map[string]any) (int, map[string]string, string, time.Duration) {
		if n == 1 {
			return 200, nil, "<no choices>", 0
		}
		return 200, nil, "fine", 0
	})
	c, _ := client(t, f, OpenAIOptions{})
	resp, err := c.Chat(context.Background(), ask("x"))
	require.NoError(t, err)
	require.Equal(t, "fine", resp.Content)
}

// chatAtOnce makes n calls at once and waits for them; each must succeed.
func chatAtOnce(t *testing.T, c *OpenAI, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Chat(context.Background(), ask(fmt.Sprint(i)))
			require.NoError(t, err)
		}()
	}
	wg.Wait()
}

func TestConcurrencyLimit(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(int64, map[string]any) (int, map[string]string, string, time.Duration) {
		return 200, nil, "ok", 50 * time.Millisecond
	})
	c, _ := client(t, f, OpenAIOptions{Concurrency: 2})
	chatAtOnce(t, c, 8)
	require.EqualValues(t, 8, f.calls.Load())
	require.EqualValues(t, 2, f.maxIn.Load())
}

// TestConnectionsReused: waves of concurrent calls reuse the connections
// of the first wave; none is dialled again (with a remote endpoint, each
// dial is a TCP and TLS handshake).
func TestConnectionsReused(t *testing.T) {
	t.Parallel()
	var conns atomic.Int64
	f := newFake(t, func(int64, map[string]any) (int, map[string]string, string, time.Duration) {
		return 200, nil, "ok", 20 * time.Millisecond
	}, func(s *http.Server) {
		s.ConnState = func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				conns.Add(1)
			}
		}
	})
	const c = 16
	cl, _ := client(t, f, OpenAIOptions{Concurrency: c})
	for range 5 {
		chatAtOnce(t, cl, c)
	}
	require.EqualValues(t, 5*c, f.calls.Load())
	require.LessOrEqual(t, conns.Load(), int64(c), "connections opened for %d calls, %d at a time", 5*c, c)
}

// TestPromptInOneWrite: a request of tens of KB (a node's prompt carries
// its code, output and memory) goes out in one write on the connection,
// not one per 4 KB: each write is a system call.
func TestPromptInOneWrite(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(int64, map[string]any) (int, map[string]string, string, time.Duration) {
		return 200, nil, "ok", 0
	})
	c, _ := client(t, f, OpenAIOptions{})
	tr := c.hc.Transport.(*http.Transport)
	var writes, bytes atomic.Int64
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		return countingConn{Conn: conn, writes: &writes, bytes: &bytes}, err
	}
	prompt := strings.Repeat("the node's code and its output; ", 40<<10/32)
	_, err := c.Chat(context.Background(), Request{Messages: []Message{{Role: "user", Content: prompt}}})
	require.NoError(t, err)
	require.Greater(t, bytes.Load(), int64(len(prompt)))
	require.EqualValues(t, 1, writes.Load(), "writes for a request of %d bytes", bytes.Load())
}

type countingConn struct {
	net.Conn
	writes, bytes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	c.bytes.Add(int64(len(p)))
	return c.Conn.Write(p)
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	require.Equal(t, 3*time.Second, parseRetryAfter("3", now))
	require.Equal(t, 1500*time.Millisecond, parseRetryAfter("1.5", now))
	require.Equal(t, 20*time.Second, parseRetryAfter("Sun, 22 Nov 2026 10:00:20 GMT", now))
	for _, bad := range []string{"", "soon", "-4", "Sun, 22 Nov 2026 09:00:00 GMT"} {
		require.Zero(t, parseRetryAfter(bad, now), bad)
	}
}

// TestRecordAndReplay: a live session recorded to a cassette is served
// again offline: exactly, by messages when the model differs, in recorded
// order for repeated questions; an unknown request is an error.
func TestRecordAndReplay(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(n int64, _ map[string]any) (int, map[string]string, string, time.Duration) {
		return 200, nil, fmt.Sprintf("reply %d", n), 0
	})
	live, _ := client(t, f, OpenAIOptions{})
	path := filepath.Join(t.TempDir(), "cassette.jsonl")
	rec, err := NewRecorder(live, path)
	require.NoError(t, err)
	ctx := context.Background()
	for _, q := range []string{"a", "b", "a"} {
		_, err := rec.Chat(ctx, ask(q))
		require.NoError(t, err)
	}
	require.NoError(t, rec.Close())

	r, err := OpenReplay(path)
	require.NoError(t, err)
	for _, want := range []string{"reply 1", "reply 3", "reply 3"} { // "a" twice recorded, then the last again
		resp, err := r.Chat(ctx, ask("a"))
		require.NoError(t, err)
		require.Equal(t, want, resp.Content)
		require.True(t, resp.CacheHit)
	}
	other := ask("b")
	other.Model = "another-model"
	resp, err := r.Chat(ctx, other)
	require.NoError(t, err, "the loose key: same messages")
	require.Equal(t, "reply 2", resp.Content)
	_, err = r.Chat(ctx, ask("never asked"))
	require.ErrorIs(t, err, ErrNoReply)
	require.ErrorContains(t, err, `last message "never asked"`)
	require.EqualValues(t, 3, f.calls.Load(), "replay sends nothing")

	require.NoError(t, os.WriteFile(path, []byte("{not json\n"), 0o644))
	_, err = OpenReplay(path)
	require.ErrorContains(t, err, "line 1")
}

// TestScriptedReplay: scripted exchanges answer any request of their
// purpose, in order, after the keyed lookups; other purposes get ErrNoReply.
func TestScriptedReplay(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "script.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`{"scripted": true, "purpose": "draft", "response": {"content": "one"}}
{"scripted": true, "purpose": "draft", "response": {"content": "two"}}
`), 0o644))
	r, err := OpenReplay(path)
	require.NoError(t, err)
	ctx := context.Background()
	for _, want := range []string{"one", "two", "two"} {
		req := ask("anything " + want)
		req.Purpose = "draft"
		resp, err := r.Chat(ctx, req)
		require.NoError(t, err)
		require.Equal(t, want, resp.Content)
	}
	req := ask("x")
	req.Purpose = "debug"
	_, err = r.Chat(ctx, req)
	require.ErrorIs(t, err, ErrNoReply)

	require.NoError(t, os.WriteFile(path, []byte(`{"scripted": true, "response": {"content": "one"}}`+"\n"), 0o644))
	_, err = OpenReplay(path)
	require.ErrorContains(t, err, "a scripted exchange has a purpose")
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	var got Request
	temp := 0.3
	d := Defaults{Client: ClientFunc(func(_ context.Context, r Request) (Response, error) { got = r; return Response{Content: "x"}, nil }),
		Model: "m", Temperature: &temp, MaxTokens: 99}
	_, err := d.Chat(context.Background(), ask("q"))
	require.NoError(t, err)
	require.Equal(t, "m", got.Model)
	require.Equal(t, 0.3, *got.Temperature)
	require.Equal(t, 99, got.MaxTokens)
	req := ask("q")
	req.Model, req.MaxTokens = "other", 5
	_, err = d.Chat(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, "other", got.Model, "a request's own settings win")
	require.Equal(t, 5, got.MaxTokens)
}

// TestMetered: calls are priced, recorded in llm_calls, and refused once
// the budget is spent.
func TestMetered(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(int64, map[string]any) (int, map[string]string, string, time.Duration) { return 200, nil, "ok", 0 })
	live, _ := client(t, f, OpenAIOptions{})
	var mu sync.Mutex
	var calls []Call
	m := &Metered{Client: live, Run: "r1", Prices: Prices{"test-model": {InPerMTok: 2, OutPerMTok: 10}},
		Budget: Budget{MaxCostUSD: 0.0011}, Record: func(_ context.Context, c Call) {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, c)
		}}
	ctx := context.Background()
	for range 3 {
		_, err := m.Chat(ctx, ask("x"))
		require.NoError(t, err)
	}
	// 3 calls x (100 x 2 + 20 x 10) / 1e6 = $0.0012: the budget is spent.
	u := m.Usage()
	require.EqualValues(t, 3, u.Calls)
	require.InDelta(t, 0.0012, u.CostUSD, 1e-12)
	spent, why := m.Spent()
	require.True(t, spent)
	require.Contains(t, why, "reached the budget of $0.0011")
	_, err := m.Chat(ctx, ask("x"))
	require.ErrorIs(t, err, ErrBudget)
	require.EqualValues(t, 3, f.calls.Load(), "nothing sent past the budget")

	require.Len(t, calls, 3, "the refused call sent nothing and is not a call")
	c := calls[0]
	require.Equal(t, []any{"r1", "n1", "draft", "test-model", int64(100), int64(20), false, ""},
		[]any{c.Run, c.Node, c.Purpose, c.Model, c.TokensIn, c.TokensOut, c.CacheHit, c.Error})
	require.InDelta(t, 0.0004, c.CostUSD, 1e-12)
	require.Positive(t, c.Latency)

	tokens := &Metered{Client: live, Budget: Budget{MaxTokens: 200}}
	_, err = tokens.Chat(ctx, ask("x"))
	require.NoError(t, err)
	_, err = tokens.Chat(ctx, ask("x"))
	require.NoError(t, err)
	_, err = tokens.Chat(ctx, ask("x"))
	require.ErrorIs(t, err, ErrBudget)
	require.True(t, errors.Is(err, ErrBudget))
}

func writeFile(path string, data []byte) error { return os.WriteFile(path, data, 0o644) }

// TestNotACompletionIsRetried: a 200 answer that is an HTML page (a proxy's
// login page, say) or not JSON at all is a transport error: retried like a
// 5xx, and when every attempt gets one, the error says what came back.
func TestNotACompletionIsRetried(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	var allBad atomic.Bool
	bad := func(n int64) bool { return n <= 2 || allBad.Load() }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		switch {
		case bad(n) && n%2 == 1:
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, "<!DOCTYPE html><html><body>Please log in to the proxy</body></html>")
		case bad(n):
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, "<html>oops</html>")
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id": "x", "object": "chat.completion", "model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": "fine"}, "finish_reason": "stop"}]}`)
		}
	}))
	defer srv.Close()
	c, err := NewOpenAI(OpenAIOptions{BaseURL: srv.URL + "/v1", Model: "m", Logger: testutil.Logger(t)})
	require.NoError(t, err)
	c.wait = func(ctx context.Context, d time.Duration) error { return ctx.Err() }
	resp, err := c.Chat(context.Background(), ask("x"))
	require.NoError(t, err)
	require.Equal(t, "fine", resp.Content)
	require.EqualValues(t, 3, calls.Load())

	allBad.Store(true)
	calls.Store(0)
	_, err = c.Chat(context.Background(), ask("x"))
	require.ErrorIs(t, err, ErrRetriesExhausted)
	require.ErrorIs(t, err, errNotCompletion)
	require.EqualValues(t, 5, calls.Load())
	_, err = c.Chat(context.Background(), ask("x"))
	require.ErrorContains(t, err, "not a chat completion")
}

// TestImages: a user message's images go as image_url content parts (data
// URLs) after its text; images where they cannot go, of another type, empty,
// too large or too many are refused before anything is sent.
func TestImages(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(int64, map[string]any) (int, map[string]string, string, time.Duration) {
		return 200, nil, `{"summary": "ok"}`, 0
	})
	c, _ := client(t, f, OpenAIOptions{})
	png := []byte("\x89PNG\r\n\x1a\nrest")
	req := ask("look at the plot")
	req.Messages[1].Images = []Image{{MIME: "image/png", Data: png}}
	_, err := c.Chat(context.Background(), req)
	require.NoError(t, err)
	msgs := f.bodies[0]["messages"].([]any)
	require.Equal(t, "You write HPC code.", msgs[0].(map[string]any)["content"], "a message without images stays a string")
	parts := msgs[1].(map[string]any)["content"].([]any)
	require.Equal(t, []any{
		map[string]any{"type": "text", "text": "look at the plot"},
		map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64," + base64.StdEncoding.EncodeToString(png), "detail": "auto"}},
	}, parts)

	many := make([]Image, MaxImages+1)
	for i := range many {
		many[i] = Image{MIME: "image/jpeg", Data: []byte{1}}
	}
	for name, tc := range map[string]struct {
		role   string
		images []Image
		want   string
	}{
		"system":    {"system", []Image{{MIME: "image/png", Data: png}}, "only user messages may"},
		"svg":       {"user", []Image{{MIME: "image/svg+xml", Data: []byte("<svg/>")}}, "image/svg+xml of 6 bytes"},
		"empty":     {"user", []Image{{MIME: "image/gif"}}, "image/gif of 0 bytes"},
		"too large": {"user", []Image{{MIME: "image/webp", Data: make([]byte, MaxImageBytes+1)}}, "image/webp of 4194305 bytes"},
		"too many":  {"user", many, "9 images, at most 8"},
	} {
		req := Request{Messages: []Message{{Role: tc.role, Content: "x", Images: tc.images}}}
		_, err := c.Chat(context.Background(), req)
		require.ErrorIs(t, err, ErrBadRequest, name)
		require.ErrorContains(t, err, tc.want, name)
	}
	require.EqualValues(t, 1, f.calls.Load(), "nothing else was sent")
	require.Equal(t, "image/jpeg", ImageMIME("plot.JPG"))
	require.Empty(t, ImageMIME("plot.svg"))
}

// TestOversizedAnswer: an endpoint that answers more than maxReplyBytes
// gets a clear error, once (it is not asked again).
func TestOversizedAnswer(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"choices": [{"message": {"content": "`)
		chunk := []byte(strings.Repeat("x", 1<<20))
		for range maxReplyBytes>>20 + 1 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		fmt.Fprint(w, `"}}]}`)
	}))
	defer srv.Close()
	c, err := NewOpenAI(OpenAIOptions{BaseURL: srv.URL, Model: "m", Logger: testutil.Logger(t)})
	require.NoError(t, err)
	_, err = c.Chat(context.Background(), ask("x"))
	require.ErrorIs(t, err, errReplyTooLarge)
	require.ErrorContains(t, err, "over 32 MiB")
	require.EqualValues(t, 1, calls.Load())
}

// TestAnswersKeptWhole: the body of an answer is read into a lent buffer;
// what a completion keeps of it stays as it was when later answers are
// read into the same buffer.
func TestAnswersKeptWhole(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		content, _ := json.Marshal(strings.Repeat(fmt.Sprintf("reply %d ", n), 200*int(n)))
		fmt.Fprintf(w, `{"model": "m%d", "choices": [{"message": {"content": %s}, "finish_reason": "stop"}]}`, n, content)
	}))
	defer srv.Close()
	c, err := NewOpenAI(OpenAIOptions{BaseURL: srv.URL, Model: "m", Logger: testutil.Logger(t)})
	require.NoError(t, err)
	var got []Response
	for range 4 {
		r, err := c.Chat(context.Background(), ask("x"))
		require.NoError(t, err)
		got = append(got, r)
	}
	for i, r := range got {
		n := i + 1
		require.Equal(t, fmt.Sprintf("m%d", n), r.Model)
		require.Equal(t, strings.Repeat(fmt.Sprintf("reply %d ", n), 200*n), r.Content)
	}
}
