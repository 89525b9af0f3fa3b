package llm

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
)

// Endpoint is the kind of server at OPENAI_BASE_URL: what it accepts differs
// (see Profile).
type Endpoint string

// The endpoints hpcq knows. EndpointCompatible is any other server of the
// chat completions API, spoken as OpenAI documents it.
const (
	EndpointOpenAI     Endpoint = "openai"
	EndpointAzure      Endpoint = "azure"
	EndpointVLLM       Endpoint = "vllm"
	EndpointOllama     Endpoint = "ollama"
	EndpointLlamaCpp   Endpoint = "llamacpp"
	EndpointProxy      Endpoint = "proxy" // LiteLLM, OpenRouter, ...
	EndpointCompatible Endpoint = "compatible"
)

// Endpoints lists the accepted values of HPCQ_LLM_ENDPOINT.
var Endpoints = []Endpoint{EndpointOpenAI, EndpointAzure, EndpointVLLM, EndpointOllama, EndpointLlamaCpp, EndpointProxy, EndpointCompatible}

// ParseEndpoint reads HPCQ_LLM_ENDPOINT: "" or "auto" is told from the URL.
func ParseEndpoint(s, baseURL string) (Endpoint, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" || s == "auto" {
		return DetectEndpoint(baseURL), nil
	}
	for _, e := range Endpoints {
		if Endpoint(s) == e {
			return e, nil
		}
	}
	return "", fmt.Errorf("%w: HPCQ_LLM_ENDPOINT %q: one of auto, %s", ErrBadRequest, s, endpointList())
}

func endpointList() string {
	names := make([]string, len(Endpoints))
	for i, e := range Endpoints {
		names[i] = string(e)
	}
	return strings.Join(names, ", ")
}

// DetectEndpoint tells the endpoint from its URL: OpenAI's and Azure's
// hosts, Ollama's port (11434), OpenRouter's host and LiteLLM's usual port
// (4000); anything else is EndpointCompatible (set HPCQ_LLM_ENDPOINT for
// vLLM or llama.cpp: their ports are anyone's).
func DetectEndpoint(baseURL string) Endpoint {
	if strings.TrimSpace(baseURL) == "" {
		return EndpointOpenAI
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		return EndpointCompatible
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	switch {
	case host == "api.openai.com":
		return EndpointOpenAI
	case strings.HasSuffix(host, ".openai.azure.com"), strings.HasSuffix(host, ".cognitiveservices.azure.com"),
		strings.HasSuffix(host, ".services.ai.azure.com"):
		return EndpointAzure
	case port == "11434":
		return EndpointOllama
	case host == "openrouter.ai", strings.HasSuffix(host, ".openrouter.ai"), port == "4000":
		return EndpointProxy
	}
	if ip := net.ParseIP(host); ip == nil && strings.Contains(host, "litellm") {
		return EndpointProxy
	}
	return EndpointCompatible
}

// reasoningName matches OpenAI's reasoning models: o1, o3, o4-mini, gpt-5,
// gpt-5.2, gpt-6..., with a provider prefix (openai/o3 through a proxy),
// but not the chat variants (gpt-5-chat-latest), which take a temperature.
var reasoningName = regexp.MustCompile(`^(?:[a-z0-9_.-]+/)*(?:o[1-9](?:$|[-_.:])|gpt-[5-9](?:$|[-_.:]))`)

// IsReasoningModel tells a reasoning model by its name.
func IsReasoningModel(model string) bool {
	m := strings.ToLower(strings.TrimSpace(model))
	return reasoningName.MatchString(m) && !strings.Contains(m, "-chat")
}

// ReasoningEfforts are the values of llm.reasoning_effort, least first.
var ReasoningEfforts = []string{"none", "minimal", "low", "medium", "high"}

// CheckReasoningEffort: "" or one of ReasoningEfforts.
func CheckReasoningEffort(s string) error {
	if s == "" {
		return nil
	}
	for _, e := range ReasoningEfforts {
		if s == e {
			return nil
		}
	}
	return fmt.Errorf("reasoning_effort %q: one of %s", s, strings.Join(ReasoningEfforts, ", "))
}

// lowerEffort is the effort below e ("" is the endpoints' default,
// medium), or "" when there is none to go to.
func lowerEffort(e string) string {
	if e == "" {
		e = "medium"
	}
	for i, x := range ReasoningEfforts {
		if x == e && i > 1 { // never down to none: the model would not reason at all
			return ReasoningEfforts[i-1]
		}
	}
	return ""
}

// Profile is what hpcq sends to one model at one endpoint: resolved at
// start (Resolve) and printed by `scheduler check`.
type Profile struct {
	Endpoint Endpoint
	Model    string
	// Reasoning: a reasoning model (by its name, or llm.reasoning).
	Reasoning       bool
	ReasoningSource string // "its name", or the setting
	// TokenField is the request's output limit: max_tokens or
	// max_completion_tokens.
	TokenField string
	// Temperature: the request's temperature is sent (a reasoning model
	// refuses any but the default).
	Temperature bool
	// Effort: reasoning_effort is sent when a request has one.
	Effort bool
	// Stream: replies are streamed (HPCQ_LLM_STREAM), with
	// stream_options.include_usage.
	Stream bool
	// Auth is how the key goes: "Authorization: Bearer" or "api-key".
	Auth string
	// Path is where requests go, after the base URL.
	Path string
}

// Resolve is the profile of model at endpoint; reasoning, when set,
// overrides what the model's name says.
func Resolve(endpoint Endpoint, model string, reasoning *bool, stream bool, apiVersion string) Profile {
	p := Profile{Endpoint: endpoint, Model: model, Stream: stream, TokenField: "max_tokens", Temperature: true,
		Auth: "Authorization: Bearer", Path: "/chat/completions"}
	p.Reasoning, p.ReasoningSource = IsReasoningModel(model), "its name"
	if reasoning != nil {
		p.Reasoning, p.ReasoningSource = *reasoning, "llm.reasoning or HPCQ_LLM_REASONING"
	}
	if p.Reasoning {
		p.Temperature, p.Effort = false, true
		// Ollama and llama.cpp document max_tokens only: a field they do
		// not know would leave the reply unbounded.
		if endpoint != EndpointOllama && endpoint != EndpointLlamaCpp {
			p.TokenField = "max_completion_tokens"
		}
	}
	if endpoint == EndpointAzure {
		p.Auth = "api-key"
		p.Path = "/openai/deployments/" + model + "/chat/completions?api-version=" + apiVersion
	}
	return p
}

// Name is how the endpoint is called.
func (e Endpoint) Name() string {
	switch e {
	case EndpointOpenAI:
		return "OpenAI"
	case EndpointAzure:
		return "Azure OpenAI"
	case EndpointVLLM:
		return "vLLM"
	case EndpointOllama:
		return "Ollama"
	case EndpointLlamaCpp:
		return "llama.cpp server"
	case EndpointProxy:
		return "a proxy (LiteLLM, OpenRouter, ...)"
	}
	return "an OpenAI-compatible endpoint"
}

// String is the profile on one line, for logs and `scheduler check`.
func (p Profile) String() string {
	var b strings.Builder
	if p.Reasoning {
		fmt.Fprintf(&b, "%s, a reasoning model (by %s), to %s: %s, reasoning_effort, no temperature or top_p", p.Model, p.ReasoningSource, p.Endpoint.Name(), p.TokenField)
	} else {
		fmt.Fprintf(&b, "%s, a chat model, to %s: %s, temperature", p.Model, p.Endpoint.Name(), p.TokenField)
	}
	if p.Stream {
		b.WriteString("; replies streamed (stream_options.include_usage)")
	} else {
		b.WriteString("; whole replies")
	}
	fmt.Fprintf(&b, "; POST %s, %s", p.Path, p.Auth)
	return b.String()
}
