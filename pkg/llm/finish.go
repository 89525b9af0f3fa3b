package llm

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sashabaranov/go-openai"
)

// How a reply ended: the finish_reason values the chat completions API
// documents, and FinishRefusal for a reply whose message carries a
// refusal (OpenAI's message.refusal, streamed as delta.refusal; the API's
// finish_reason is then "stop"), as llm_calls.finish_reason records them.
const (
	FinishStop          = "stop"
	FinishLength        = "length"
	FinishContentFilter = "content_filter"
	FinishToolCalls     = "tool_calls"
	FinishFunctionCall  = "function_call"
	FinishRefusal       = "refusal"
)

// Errors of a reply that ended without an answer to use: each is the
// reason of its node, never a format error of the reply.
var (
	// ErrRefused: the model refused the request (its words in the error).
	ErrRefused = errors.New("the model refused")
	// ErrFiltered: the endpoint's content filter stopped the reply, or
	// refused the prompt (Azure OpenAI; the categories in the error).
	ErrFiltered = errors.New("the endpoint's content filter stopped it")
	// ErrCut: the reply reached its output limit before it was complete.
	ErrCut = errors.New("the reply was cut at its output limit")
	// ErrToolCalls: the endpoint answered with tool calls, though no tool
	// was offered: a defect of the endpoint (or of its chat template).
	ErrToolCalls = errors.New("the endpoint answered with tool calls, though none were offered")
)

// Finish is how r ended as llm_calls records it: its finish_reason, or
// FinishRefusal for a refusal.
func (r Response) Finish() string {
	if r.Refusal != "" {
		return FinishRefusal
	}
	return r.FinishReason
}

// Unanswered is the error r's finish is, nil for a reply to read: a
// refusal, a content filter, a cut (a reasoning model's reply cut with
// nothing said is ReasoningSpent's instead), tool calls.
func Unanswered(r Response) error {
	switch r.Finish() {
	case FinishRefusal:
		return fmt.Errorf("%w: %q", ErrRefused, cutMessage(strings.TrimSpace(r.Refusal)))
	case FinishContentFilter:
		what := "the reply"
		if r.Content != "" {
			what = fmt.Sprintf("the reply after %d bytes", len(r.Content))
		}
		if r.Filter != "" {
			return fmt.Errorf("%w: %s (%s)", ErrFiltered, what, r.Filter)
		}
		return fmt.Errorf("%w: %s (the endpoint named no category)", ErrFiltered, what)
	case FinishLength:
		if ReasoningSpent(r) != "" {
			return nil
		}
		return fmt.Errorf("%w: %s", ErrCut, cutAdvice(r))
	case FinishToolCalls, FinishFunctionCall:
		return fmt.Errorf("%w (finish_reason %q)", ErrToolCalls, r.FinishReason)
	}
	return nil
}

// cutAdvice says where a reply was cut and what to raise.
func cutAdvice(r Response) string {
	out := fmt.Sprintf("%d bytes", len(r.Content))
	if r.TokensOut > 0 {
		out = fmt.Sprintf("%d tokens, %d bytes", r.TokensOut, len(r.Content))
	}
	if r.Limit <= 0 {
		return out + " written with no limit set, so the endpoint's own limit cut it (vLLM's max_model_len, Ollama's num_predict, " +
			"llama.cpp's n_predict); set llm.max_tokens to the model's output limit"
	}
	return fmt.Sprintf("%s written, at max_tokens %d; raise llm.max_tokens (to %d or more, within the model's output limit; "+
		"llm.max_tokens_cap lets a cut reply be asked again with up to that many)", out, r.Limit, 2*r.Limit)
}

// filterCategories are the categories an Azure content filter result
// says it filtered ("hate (high)", "jailbreak").
func filterCategories(f openai.ContentFilterResults) string {
	var out []string
	add := func(name string, filtered bool, severity string) {
		if filtered {
			if severity != "" && severity != "safe" {
				name += " (" + severity + ")"
			}
			out = append(out, name)
		}
	}
	add("hate", f.Hate.Filtered, f.Hate.Severity)
	add("self_harm", f.SelfHarm.Filtered, f.SelfHarm.Severity)
	add("sexual", f.Sexual.Filtered, f.Sexual.Severity)
	add("violence", f.Violence.Filtered, f.Violence.Severity)
	add("jailbreak", f.JailBreak.Filtered || f.JailBreak.Detected, "")
	add("profanity", f.Profanity.Filtered || f.Profanity.Detected, "")
	return strings.Join(out, ", ")
}
