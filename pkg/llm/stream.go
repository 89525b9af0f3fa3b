package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
	openai "github.com/sashabaranov/go-openai"

	"github.com/hpcq/hpcq/internal/textcut"
)

// stream asks for the reply as a stream of chunks, each within the idle
// timeout of the one before (the first within the attempt's cap for a
// reasoning model, which says nothing while it thinks), usage from the
// last. A stream that ends without a finish_reason was cut: errStreamCut.
func (c *OpenAI) stream(ctx context.Context, p Profile, creq openai.ChatCompletionRequest) (Response, error) {
	creq.Stream = true
	creq.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	first := c.o.IdleTimeout
	if p.Reasoning {
		first = c.o.Timeout
	}
	idle := time.AfterFunc(first, func() { cancel(fmt.Errorf("%w (%s, HPCQ_LLM_IDLE_TIMEOUT)", errIdle, c.o.IdleTimeout)) })
	defer idle.Stop()
	idleErr := func(err error) error { return withCause(ctx, sctx, err) }
	s, err := c.api.CreateChatCompletionStream(sctx, creq)
	if err != nil {
		return Response{}, idleErr(err)
	}
	defer s.Close()
	var resp Response
	var content, refusal strings.Builder
	usage := false
	for {
		chunk, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Response{}, idleErr(answerError(err))
		}
		idle.Reset(c.o.IdleTimeout)
		if chunk.Model != "" {
			resp.Model = chunk.Model
		}
		if chunk.Usage != nil {
			resp.setUsage(chunk.Usage)
			usage = true
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue
			}
			content.WriteString(ch.Delta.Content)
			refusal.WriteString(ch.Delta.Refusal)
			if content.Len()+refusal.Len() > maxReplyBytes {
				return Response{}, errReplyTooLarge
			}
			if ch.FinishReason != "" {
				resp.FinishReason = string(ch.FinishReason)
			}
			if f := filterCategories(ch.ContentFilterResults); f != "" {
				resp.Filter = f // Azure sends its results with each chunk; the last one filtered names why
			}
		}
	}
	if resp.FinishReason == "" {
		return Response{}, fmt.Errorf("%w (%d bytes of reply received)", errStreamCut, content.Len())
	}
	resp.Content, resp.Refusal = content.String(), refusal.String()
	if !usage {
		estimateUsage(&resp, creq)
	}
	return resp, nil
}

// boundedDoer is the HTTP client go-openai sends with: every answer's body
// is read up to maxReplyBytes (more is errReplyTooLarge), a 2xx answer that
// is neither JSON nor an event stream (a proxy's login page) is
// errNotCompletion, a stream asked for and answered with a whole completion
// (a server that ignores stream) is read as the one chunk it stands for,
// and a Retry-After is kept for the attempt.
type boundedDoer struct{ hc *http.Client }

// maxReplyBytes bounds the body of an answer read, and the content of a
// streamed reply: a chat completion is a few kilobytes to a few hundred;
// more is not an answer to use. maxStreamBytes bounds the events of a
// stream.
const (
	maxReplyBytes  = 32 << 20
	maxStreamBytes = 8 * maxReplyBytes
)

func (d boundedDoer) Do(req *http.Request) (*http.Response, error) {
	resp, err := d.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if ra, ok := req.Context().Value(retryAfterKey{}).(*time.Duration); ok {
		*ra = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	ct := strings.ToLower(resp.Header.Get("Content-Type"))
	limit := int64(maxReplyBytes)
	if resp.StatusCode/100 == 2 && strings.Contains(ct, "event-stream") {
		// A chunk carries a token or two in a hundred bytes or more of
		// JSON: the reply itself is bounded as it is put together.
		limit = maxStreamBytes
	}
	resp.Body = &boundedBody{rc: resp.Body, left: limit}
	if resp.StatusCode/100 != 2 {
		return resp, nil
	}
	streamAsked := req.Header.Get("Accept") == "text/event-stream"
	switch {
	case strings.Contains(ct, "event-stream"):
		return resp, nil
	case ct == "" && !streamAsked, strings.Contains(ct, "json") && !streamAsked:
		return resp, nil
	case strings.Contains(ct, "json"):
		return asStream(resp)
	}
	defer resp.Body.Close()
	start, _ := io.ReadAll(io.LimitReader(resp.Body, 160))
	return nil, fmt.Errorf("%w: status %d with Content-Type %q: %q", errNotCompletion, resp.StatusCode, ct, textcut.OneLine(string(start[:min(len(start), maxBodyExcerpt)]), 160))
}

// asStream turns a whole completion into the stream of one chunk it
// stands for.
func asStream(resp *http.Response) (*http.Response, error) {
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var whole openai.ChatCompletionResponse
	if err := json.Unmarshal(data, &whole); err != nil {
		return nil, fmt.Errorf("%w: %w: %q", errNotCompletion, err, textcut.OneLine(string(data[:min(len(data), maxBodyExcerpt)]), 160))
	}
	chunk := openai.ChatCompletionStreamResponse{ID: whole.ID, Object: "chat.completion.chunk", Created: whole.Created, Model: whole.Model, Usage: &whole.Usage}
	for _, ch := range whole.Choices {
		chunk.Choices = append(chunk.Choices, openai.ChatCompletionStreamChoice{Index: ch.Index, FinishReason: ch.FinishReason,
			Delta: openai.ChatCompletionStreamChoiceDelta{Role: ch.Message.Role, Content: ch.Message.Content}})
	}
	if len(chunk.Choices) == 0 {
		return nil, errEmptyReply
	}
	line, err := json.Marshal(chunk)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("data: ")
	b.Write(line)
	b.WriteString("\n\ndata: [DONE]\n\n")
	resp.Header.Set("Content-Type", "text/event-stream")
	resp.Body, resp.ContentLength = io.NopCloser(&b), int64(b.Len())
	return resp, nil
}

// boundedBody is a body read up to left bytes; past it, errReplyTooLarge.
type boundedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errReplyTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n - 1, errReplyTooLarge
	}
	return n, err
}

func (b *boundedBody) Close() error { return b.rc.Close() }

// setUsage takes the usage an endpoint reported.
func (r *Response) setUsage(u *openai.Usage) {
	r.TokensIn, r.TokensOut = u.PromptTokens, u.CompletionTokens
	if d := u.CompletionTokensDetails; d != nil {
		r.ReasoningTokens = d.ReasoningTokens
	}
	if d := u.PromptTokensDetails; d != nil {
		r.CachedTokens = d.CachedTokens
	}
}

// add adds o's usage to r's.
func (r *Response) add(o Response) {
	r.TokensIn += o.TokensIn
	r.TokensOut += o.TokensOut
	r.ReasoningTokens += o.ReasoningTokens
	r.CachedTokens += o.CachedTokens
	r.UsageEstimated = r.UsageEstimated || o.UsageEstimated
}

// tokenizer is o200k_base (GPT-4o, o-series, GPT-5), from the BPE file the
// loader embeds: nothing is downloaded.
var tokenizer = sync.OnceValues(func() (*tiktoken.Tiktoken, error) {
	tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
	return tiktoken.GetEncoding("o200k_base")
})

// estimateUsage counts the tokens of a request and its reply where the
// endpoint reported none (a stream without usage): o200k_base, 4 tokens
// per message as OpenAI's counting guide does; marked estimated.
func estimateUsage(r *Response, creq openai.ChatCompletionRequest) {
	enc, err := tokenizer()
	if err != nil {
		return
	}
	in := 3
	for _, m := range creq.Messages {
		in += 4 + len(enc.Encode(m.Role, nil, nil)) + len(enc.Encode(m.Content, nil, nil))
		for _, part := range m.MultiContent {
			in += len(enc.Encode(part.Text, nil, nil))
		}
	}
	r.TokensIn, r.TokensOut, r.UsageEstimated = in, len(enc.Encode(r.Content, nil, nil)), true
}
