package llm_test

import (
	"fmt"

	"github.com/hpcq/hpcq/pkg/llm"
)

// What a request looks like for a model at an endpoint: a reasoning model
// gets max_completion_tokens and no temperature (as OpenAI requires), the
// same model behind Ollama keeps max_tokens (all Ollama documents), and
// Azure OpenAI takes the key as api-key on a deployment's path.
func ExampleResolve() {
	fmt.Println(llm.Resolve(llm.EndpointOpenAI, "gpt-4o-mini", nil, false, ""))
	fmt.Println(llm.Resolve(llm.EndpointOpenAI, "o4-mini", nil, false, ""))
	reasoning := true // llm.reasoning: true in run.yaml
	fmt.Println(llm.Resolve(llm.EndpointOllama, "qwen3", &reasoning, false, ""))
	p := llm.Resolve(llm.EndpointAzure, "gpt-5.2", nil, true, "2024-12-01-preview")
	fmt.Println(p.TokenField, p.Auth, p.Path)
	// Output:
	// gpt-4o-mini, a chat model, to OpenAI: max_tokens, temperature; whole replies; POST /chat/completions, Authorization: Bearer
	// o4-mini, a reasoning model (by its name), to OpenAI: max_completion_tokens, reasoning_effort, no temperature or top_p; whole replies; POST /chat/completions, Authorization: Bearer
	// qwen3, a reasoning model (by llm.reasoning or HPCQ_LLM_REASONING), to Ollama: max_tokens, reasoning_effort, no temperature or top_p; whole replies; POST /chat/completions, Authorization: Bearer
	// max_completion_tokens api-key /openai/deployments/gpt-5.2/chat/completions?api-version=2024-12-01-preview
}

// The endpoint hpcq assumes from OPENAI_BASE_URL when HPCQ_LLM_ENDPOINT is
// auto.
func ExampleDetectEndpoint() {
	for _, u := range []string{"", "https://api.openai.com/v1", "https://my.openai.azure.com", "http://gpu01:11434/v1", "http://gpu01:8000/v1"} {
		fmt.Printf("%q: %s\n", u, llm.DetectEndpoint(u).Name())
	}
	// Output:
	// "": OpenAI
	// "https://api.openai.com/v1": OpenAI
	// "https://my.openai.azure.com": Azure OpenAI
	// "http://gpu01:11434/v1": Ollama
	// "http://gpu01:8000/v1": an OpenAI-compatible endpoint
}
