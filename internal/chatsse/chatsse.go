// Package chatsse writes a chat completion as the server-sent events a
// streaming OpenAI-compatible endpoint sends: the fake endpoints of the
// tests stream as the real ones do.
package chatsse

import (
	"encoding/json"
	"fmt"
	"net/http"
	"unicode/utf8"
)

// Reply is one streamed completion.
type Reply struct {
	ID, Model, Content string
	// FinishReason ends the last content chunk; "" cuts the stream there
	// (no finish_reason, no [DONE]), as a dropped connection would.
	FinishReason string
	// Usage, when not nil, is sent in a last chunk with no choices (what
	// stream_options.include_usage asks for).
	Usage any
	// Chunk is the size of each content chunk in bytes, cut between runes
	// [16, or a 256th of a larger reply: a test's 17 MB reply is not a
	// million events].
	Chunk int
	// Refusal is streamed as delta.refusal chunks after the content (as
	// OpenAI streams a refusal); Filter, when not nil, goes with the
	// finish as the choice's content_filter_results (as Azure OpenAI
	// sends them).
	Refusal string
	Filter  any
}

// Write streams r to w.
func Write(w http.ResponseWriter, r Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(v any) {
		data, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", data)
		if flusher != nil {
			flusher.Flush()
		}
	}
	chunk := func(delta map[string]string, finish any) map[string]any {
		return map[string]any{"id": r.ID, "object": "chat.completion.chunk", "created": 1, "model": r.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	size := r.Chunk
	if size <= 0 {
		size = max(16, len(r.Content)/256)
	}
	send(chunk(map[string]string{"role": "assistant", "content": ""}, nil))
	for _, part := range []struct{ field, text string }{{"content", r.Content}, {"refusal", r.Refusal}} {
		for s := part.text; s != ""; {
			n := min(size, len(s))
			for n < len(s) && !utf8.RuneStart(s[n]) {
				n++
			}
			send(chunk(map[string]string{part.field: s[:n]}, nil))
			s = s[n:]
		}
	}
	if r.FinishReason == "" {
		return
	}
	last := chunk(map[string]string{}, r.FinishReason)
	if r.Filter != nil {
		last["choices"].([]any)[0].(map[string]any)["content_filter_results"] = r.Filter
	}
	send(last)
	if r.Usage != nil {
		send(map[string]any{"id": r.ID, "object": "chat.completion.chunk", "created": 1, "model": r.Model, "choices": []any{}, "usage": r.Usage})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}
