package llm

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReasoningModels(t *testing.T) {
	t.Parallel()
	for model, want := range map[string]bool{
		"o1": true, "o1-mini": true, "o3": true, "o3-mini-2025-01-31": true, "o4-mini": true, "gpt-5": true, "gpt-5.2": true,
		"gpt-5-mini": true, "GPT-5.2-2025-12-11": true, "openai/o3": true, "azure/gpt-5": true, "gpt-6": true,
		"gpt-4o": false, "gpt-4o-mini": false, "gpt-4.1": false, "gpt-5-chat-latest": false, "ollama3": false, "o": false,
		"llama3.1:8b": false, "qwen2.5-coder": false, "deepseek-r1": false, "omni-moderation-latest": false, "test-model": false,
	} {
		require.Equal(t, want, IsReasoningModel(model), model)
	}
}

func TestEndpoints(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]Endpoint{
		"": EndpointOpenAI, "https://api.openai.com/v1": EndpointOpenAI, "https://res.openai.azure.com": EndpointAzure,
		"https://res.cognitiveservices.azure.com/": EndpointAzure, "http://localhost:11434/v1": EndpointOllama,
		"https://openrouter.ai/api/v1": EndpointProxy, "http://0.0.0.0:4000": EndpointProxy, "http://litellm.internal/v1": EndpointProxy,
		"http://gpu01:8000/v1": EndpointCompatible, "::bad": EndpointCompatible,
	} {
		require.Equal(t, want, DetectEndpoint(url), url)
	}
	e, err := ParseEndpoint("vLLM", "http://localhost:11434")
	require.NoError(t, err)
	require.Equal(t, EndpointVLLM, e)
	_, err = ParseEndpoint("bedrock", "")
	require.ErrorContains(t, err, "one of auto, openai, azure, vllm, ollama, llamacpp, proxy, compatible")

	p := Resolve(EndpointOllama, "gpt-5", nil, true, "")
	require.True(t, p.Reasoning)
	require.Equal(t, "max_tokens", p.TokenField, "Ollama documents max_tokens only")
	p = Resolve(EndpointAzure, "my-deploy", new(true), false, "2025-04-01-preview")
	require.Equal(t, "max_completion_tokens", p.TokenField)
	require.Equal(t, "/openai/deployments/my-deploy/chat/completions?api-version=2025-04-01-preview", p.Path)
	require.Equal(t, "api-key", p.Auth)
	require.Equal(t, "llm.reasoning or HPCQ_LLM_REASONING", p.ReasoningSource)
	require.Equal(t, "low", lowerEffort(""), "the default is medium")
	require.Equal(t, "minimal", lowerEffort("low"))
	require.Empty(t, lowerEffort("minimal"), "never down to none")
}
