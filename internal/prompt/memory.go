package prompt

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/template"

	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/memory"
)

// The memory's own prompts (compression, summarization), plain text
// templates beside the node prompts.
//
//go:embed templates/*.txt
var memoryPromptFiles embed.FS

var memoryPrompts = template.Must(template.New("").Option("missingkey=error").ParseFS(memoryPromptFiles, "templates/*.txt"))

func renderMemoryPrompt(name string, data any) (string, error) {
	var b bytes.Buffer
	if err := memoryPrompts.ExecuteTemplate(&b, name, data); err != nil {
		return "", fmt.Errorf("prompt: %s: %w", name, err)
	}
	return b.String(), nil
}

// Compressor is the memory's compressor (memory.Compressor) on a model,
// with the compression prompt of the memory design. The memory caches its
// results, iterates and validates the length; this asks once.
type Compressor struct {
	Client llm.Client
	// Model overrides the client's default (compression_model).
	Model string
	Node  string
}

var _ memory.Compressor = Compressor{}

// Compress asks the model to fit text within targetChars.
func (c Compressor) Compress(ctx context.Context, text string, targetChars int, hint string) (string, error) {
	if hint == "" {
		hint = "memory"
	}
	user, err := renderMemoryPrompt("compression.txt", map[string]any{"Hint": hint, "MaxChars": targetChars, "Text": text})
	if err != nil {
		return "", err
	}
	resp, err := c.Client.Chat(ctx, llm.Request{Messages: []llm.Message{{Role: "user", Content: user}}, Model: c.Model,
		MaxTokens: targetChars/2 + 64, Purpose: "compress", Node: c.Node})
	if err != nil {
		return "", err
	}
	out := strings.TrimSpace(llm.StripFence(resp.Content))
	if out == "" {
		return "", errors.New("prompt: compression: empty reply")
	}
	return out, nil
}

// Summarizer folds recall events into a branch's running summary
// (memory.Summarizer) with the summarization prompts; a reply that is not
// {"summary": "<non-empty>"} is an error, and the memory then keeps the
// summary and the window as they were (the fallback).
type Summarizer struct {
	Client llm.Client
	Model  string
	// MaxChars bounds the summary the model is asked for [4000].
	MaxChars int
	Node     string
}

var _ memory.Summarizer = Summarizer{}

// Summarize returns the summary with ev folded in.
func (s Summarizer) Summarize(ctx context.Context, summary string, ev memory.RecallEvent) (string, error) {
	max := s.MaxChars
	if max <= 0 {
		max = 4000
	}
	sys, err := renderMemoryPrompt("summary_system.txt", nil)
	if err != nil {
		return "", err
	}
	user, err := renderMemoryPrompt("summary_user.txt", map[string]any{"Summary": summary, "Event": ev, "MaxChars": max})
	if err != nil {
		return "", err
	}
	resp, err := s.Client.Chat(ctx, llm.Request{Messages: []llm.Message{{Role: "system", Content: sys}, {Role: "user", Content: user}},
		Model: s.Model, JSON: true, MaxTokens: max/2 + 64, Purpose: "summarize", Node: s.Node})
	if err != nil {
		return "", err
	}
	return ParseSummary(resp.Content)
}

// ParseSummary reads a summarization reply: one JSON object with a
// non-empty string "summary" (a markdown fence around it is tolerated).
func ParseSummary(reply string) (string, error) {
	var v struct {
		Summary *string `json:"summary"`
	}
	dec := json.NewDecoder(strings.NewReader(llm.StripFence(reply)))
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("prompt: summary reply is not a JSON object: %w", err)
	}
	if dec.More() {
		return "", errors.New(`prompt: summary reply: data after the JSON object`)
	}
	if v.Summary == nil || strings.TrimSpace(*v.Summary) == "" {
		return "", errors.New(`prompt: summary reply has no non-empty "summary"`)
	}
	return strings.TrimSpace(*v.Summary), nil
}
