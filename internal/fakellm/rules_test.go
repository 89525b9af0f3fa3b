package fakellm

import "testing"

// TestReasoningModels: the names the API documents as reasoning models, and
// ordinary ones that look alike.
func TestReasoningModels(t *testing.T) {
	t.Parallel()
	for m, want := range map[string]bool{
		"o1": true, "o3-mini": true, "o4-mini-2025-04-16": true, "gpt-5": true, "gpt-5.1": true, "gpt-5-mini": true,
		"openai/gpt-5-nano": true, "ft:o4-mini:org::id": true, "gpt-5-chat-latest": false, "gpt-4o": false,
		"gpt-4.1-mini": false, "o": false, "qwen3-32b": false, "omni-moderation-latest": false,
	} {
		if got := reasoningModel(m); got != want {
			t.Errorf("reasoningModel(%q) = %v, want %v", m, got, want)
		}
	}
}
