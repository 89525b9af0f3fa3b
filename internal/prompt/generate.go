package prompt

import (
	"context"
	"errors"
	"fmt"

	"github.com/hpcq/hpcq/internal/textcut"
	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/memory"
)

// ErrUnusable: after every retry the model's replies could not be turned
// into phase artifacts; the node is buggy, with this error as the reason.
var ErrUnusable = errors.New("no usable reply")

// GenerateParams configure Generate.
type GenerateParams struct {
	Client   llm.Client
	Messages []llm.Message
	// Memory, when set, handles the replies' <memory_update> blocks on
	// Branch (writes applied, reads answered in follow-up rounds).
	Memory *memory.Memory
	Branch string
	// RequireMemoryUpdate makes a reply without the block a failure that is
	// retried with feedback (the with-memory prompts ask for it).
	RequireMemoryUpdate bool
	// Retries after the first reply [2].
	Retries int
	Purpose string
	Node    string
	// Model, when set, asks another model than the client's (the VLM).
	Model string
	// Observe, when set, sees every exchange (prompt logs).
	Observe func(Exchange)
}

// Exchange is one request and its reply (or error).
type Exchange struct {
	Attempt  int
	Request  llm.Request
	Response llm.Response
	Err      error
}

// Generate asks for phase artifacts until a reply yields valid ones, giving
// the model the reason of each failure: a missing or malformed
// <memory_update> block, invalid JSON, unsafe paths, missing commands. A
// failure of the client itself (budget, retries exhausted, no recorded
// reply) ends it at once.
func Generate(ctx context.Context, p GenerateParams) (Artifacts, error) {
	var a Artifacts
	_, err := Ask(ctx, p, "one JSON object with phase_artifacts", func(payload string) error {
		var err error
		a, err = ParseArtifacts(payload)
		return err
	})
	return a, err
}

// Ask is Generate for any reply format: parse checks the payload (what
// follows the <memory_update> block) and its error is the feedback of the
// next attempt; shape names the expected payload in that feedback. It
// returns the accepted payload.
func Ask(ctx context.Context, p GenerateParams, shape string, parse func(payload string) error) (string, error) {
	retries := p.Retries
	if retries <= 0 {
		retries = 2
	}
	msgs := append([]llm.Message(nil), p.Messages...)
	var last llm.Response
	chat := func(attempt int) (string, error) {
		req := llm.Request{Model: p.Model, Messages: msgs, Purpose: p.Purpose, Node: p.Node}
		resp, err := p.Client.Chat(ctx, req)
		if p.Observe != nil {
			p.Observe(Exchange{Attempt: attempt, Request: req, Response: resp, Err: err})
		}
		if err != nil {
			return "", err
		}
		last = resp
		// The API refuses an assistant message without content.
		content := resp.Content
		if content == "" {
			content = "(no reply)"
		}
		msgs = append(msgs, llm.Message{Role: "assistant", Content: content})
		return resp.Content, nil
	}
	var lastErr error
	again := map[string]bool{} // the finishes asked once more
	for attempt := 1; attempt <= retries+1; attempt++ {
		from := len(msgs)
		reply, err := chat(attempt)
		if err != nil {
			return "", fmt.Errorf("%s of %s: %w", p.Purpose, p.Node, err)
		}
		if err := llm.Unanswered(last); err != nil {
			if again[last.Finish()] || attempt == retries+1 {
				return "", fmt.Errorf("%s of %s: %w", p.Purpose, p.Node, err)
			}
			again[last.Finish()], lastErr = true, err
			msgs = askAgain(msgs[:from:from], reply, err, shape, p.RequireMemoryUpdate, last)
			continue
		}
		payload := reply
		if why := llm.ReasoningSpent(last); why != "" {
			// Nothing to parse: the model thought until its limit.
			err = errors.New(why)
		} else if p.Memory != nil {
			payload, err = p.Memory.Converse(ctx, p.Branch, reply, p.RequireMemoryUpdate, func(ctx context.Context, results string) (string, error) {
				msgs = append(msgs, llm.Message{Role: "user", Content: results + "\n\nContinue: answer with your <memory_update> block, then " + shape + "."})
				return chat(attempt)
			})
			if err != nil && !isReplyError(err) {
				return "", fmt.Errorf("%s of %s: %w", p.Purpose, p.Node, err)
			}
		}
		if err == nil {
			if err = parse(payload); err == nil {
				return payload, nil
			}
		}
		lastErr = err
		// The conversation goes on with an excerpt of what was refused, never
		// the whole of it: a 5 MB reply must not become a 5 MB request.
		msgs = append([]llm.Message(nil), msgs...) // the observed requests keep what was sent
		for i := from; i < len(msgs); i++ {
			if msgs[i].Role == "assistant" {
				msgs[i].Content = Excerpt(msgs[i].Content, maxRefusedExcerpt)
			}
		}
		msgs = append(msgs, llm.Message{Role: "user", Content: feedback(err, shape, p.RequireMemoryUpdate, last)})
	}
	return "", fmt.Errorf("%w after %d replies: %w", ErrUnusable, retries+1, lastErr)
}

// askAgain is the conversation (msgs, before the reply) that asks once
// more after a reply that ended without an answer (llm.Unanswered: a
// refusal, a content filter, a cut reply, tool calls): the same request,
// or for a cut reply the reply's excerpt and the feedback that it was cut.
// A second such finish is the node's reason, never a format error.
func askAgain(msgs []llm.Message, reply string, err error, shape string, requireMemory bool, last llm.Response) []llm.Message {
	if last.Finish() != llm.FinishLength {
		return msgs
	}
	return append(msgs, llm.Message{Role: "assistant", Content: Excerpt(reply, maxRefusedExcerpt)},
		llm.Message{Role: "user", Content: feedback(err, shape, requireMemory, last)})
}

// maxRefusedExcerpt bounds what of a refused reply stays in the
// conversation, and maxFeedbackReason the reason quoted back to the model.
const (
	maxRefusedExcerpt = 2048
	maxFeedbackReason = 1024
)

// Excerpt returns s when it is at most limit bytes, else its head and tail
// (about two thirds and one third of limit, cut at rune boundaries) around
// a line that says how much was left out.
func Excerpt(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	head, start := textcut.Floor(s, limit*2/3), textcut.Ceil(s, len(s)-limit/3)
	return fmt.Sprintf("%s\n[... %d bytes left out ...]\n%s", s[:head], start-head, s[start:])
}

// isReplyError: the reply's fault (the model can fix it), not the system's.
func isReplyError(err error) bool {
	return errors.Is(err, memory.ErrMissingUpdate) || errors.Is(err, memory.ErrBadUpdate) || errors.Is(err, memory.ErrOversized) ||
		errors.Is(err, memory.ErrReadRounds) ||
		errors.Is(err, memory.ErrInvalid)
}

// feedback is the message after a refused reply: the reason (cut to
// maxFeedbackReason) and what to send instead. A reply the endpoint cut off
// at its output limit (finish_reason "length") is said to be that, not a
// JSON error.
func feedback(err error, shape string, requireMemory bool, resp llm.Response) string {
	if requireMemory {
		shape = "the <memory_update> block first, then " + shape
	}
	reason := Excerpt(err.Error(), maxFeedbackReason)
	if llm.ReasoningSpent(resp) != "" {
		return fmt.Sprintf("Your previous reply was empty: all of its output limit went to reasoning before you wrote anything (%s).\n"+
			"Reason briefly, then answer with %s.", reason, shape)
	}
	if resp.FinishReason == "length" {
		size := fmt.Sprintf("%d bytes", len(resp.Content))
		if resp.TokensOut > 0 {
			size = fmt.Sprintf("%d tokens, %d bytes", resp.TokensOut, len(resp.Content))
		}
		return fmt.Sprintf("Your previous reply was cut off: it reached the output limit (%s) before it was complete, so it could not be used (%s).\n"+
			"Answer again with %s, and keep the whole reply well under that limit: fewer and shorter files, no long comments, nothing repeated.",
			size, reason, shape)
	}
	return fmt.Sprintf("Your previous reply could not be used: %s\nAnswer again with %s, and fix the problem above.", reason, shape)
}
