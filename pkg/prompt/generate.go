package prompt

import (
	"context"
	"errors"
	"fmt"

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
	chat := func(attempt int) (string, error) {
		req := llm.Request{Messages: msgs, Purpose: p.Purpose, Node: p.Node}
		resp, err := p.Client.Chat(ctx, req)
		if p.Observe != nil {
			p.Observe(Exchange{Attempt: attempt, Request: req, Response: resp, Err: err})
		}
		if err != nil {
			return "", err
		}
		msgs = append(msgs, llm.Message{Role: "assistant", Content: resp.Content})
		return resp.Content, nil
	}
	var last error
	for attempt := 1; attempt <= retries+1; attempt++ {
		reply, err := chat(attempt)
		if err != nil {
			return "", fmt.Errorf("%s of %s: %w", p.Purpose, p.Node, err)
		}
		payload := reply
		if p.Memory != nil {
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
		last = err
		msgs = append(msgs, llm.Message{Role: "user", Content: feedback(err, shape, p.RequireMemoryUpdate)})
	}
	return "", fmt.Errorf("%w after %d replies: %w", ErrUnusable, retries+1, last)
}

// isReplyError: the reply's fault (the model can fix it), not the system's.
func isReplyError(err error) bool {
	return errors.Is(err, memory.ErrMissingUpdate) || errors.Is(err, memory.ErrBadUpdate) || errors.Is(err, memory.ErrOversized) ||
		errors.Is(err, memory.ErrReadRounds) ||
		errors.Is(err, memory.ErrInvalid)
}

func feedback(err error, shape string, requireMemory bool) string {
	if requireMemory {
		shape = "the <memory_update> block first, then " + shape
	}
	return fmt.Sprintf("Your previous reply could not be used: %v\nAnswer again with %s, and fix the problem above.", err, shape)
}
