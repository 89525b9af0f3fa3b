package fakellm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
)

// Options make the server behave as one endpoint or another. Whatever
// they are, it refuses what OpenAI's API refuses, with error bodies of the
// API's shape: max_tokens, a temperature other than 1 and top_p for a
// reasoning model (o1, o3, o4-mini, gpt-5 and their dated names, or Reasoning), reasoning_effort for
// another, stream_options without a stream.
type Options struct {
	// Key, when set, is the only API key accepted (Authorization: Bearer,
	// or api-key on Azure): others get 401 invalid_api_key.
	Key string
	// Models, when set, are the only models served: others get 404
	// model_not_found.
	Models []string
	// Reasoning, when set, tells the reasoning models instead of their
	// names.
	Reasoning func(model string) bool
	// Azure serves Azure OpenAI's paths: /openai/deployments/<model>/chat/
	// completions?api-version=..., the key in api-key.
	Azure bool
	// RefuseStream answers a streamed request with 400 (param stream), as
	// OpenAI does for an organization not verified for a model's streams.
	RefuseStream bool
	// Chunk is the size of each streamed content chunk [16 bytes].
	Chunk int
	// Snapshot is the date the server answers the model with, as OpenAI
	// answers gpt-4o-mini with gpt-4o-mini-2024-07-18 ("2024-07-18");
	// Serves, on Azure, the model a deployment answers with (not the
	// deployment's name), as Azure OpenAI does.
	Snapshot string
	Serves   string
}

// answered is the model name the server answers a request for model with.
func (o Options) answered(model string) string {
	switch {
	case o.Azure && o.Serves != "":
		return o.Serves
	case o.Snapshot != "":
		return model + "-" + o.Snapshot
	}
	return model
}

// FilterResults is Azure OpenAI's content_filter_results with category
// (hate, self_harm, sexual, violence) filtered at severity; every other
// category safe.
func FilterResults(category, severity string) map[string]any {
	out := map[string]any{}
	for _, c := range []string{"hate", "self_harm", "sexual", "violence"} {
		out[c] = map[string]any{"filtered": c == category, "severity": "safe"}
		if c == category {
			out[c] = map[string]any{"filtered": true, "severity": severity}
		}
	}
	return out
}

// PromptFiltered is Azure OpenAI's answer to a prompt its content filter
// refuses: 400, code content_filter, the category in innererror.
func PromptFiltered(category, severity string) Reply {
	body, _ := json.Marshal(map[string]any{"error": map[string]any{"message": "The response was filtered due to the prompt triggering Azure " +
		"OpenAI's content management policy. Please modify your prompt and retry.", "type": nil, "param": "prompt", "code": "content_filter",
		"status": 400, "innererror": map[string]any{"code": "ResponsibleAIPolicyViolation", "content_filter_result": FilterResults(category, severity)}}})
	return Reply{Status: http.StatusBadRequest, Body: string(body)}
}

// wireRequest is the body of a chat completion request, the fields the
// server reads.
type wireRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           int      `json:"max_tokens"`
	MaxCompletionTokens int      `json:"max_completion_tokens"`
	Temperature         *float64 `json:"temperature"`
	TopP                *float64 `json:"top_p"`
	ReasoningEffort     string   `json:"reasoning_effort"`
}

// refuse answers an error of the API's shape: {"error": {"message",
// "type", "param", "code"}}, param and code null when empty.
func refuse(w http.ResponseWriter, status int, typ, param, code, msg string) {
	e := map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}
	if param != "" {
		e["param"] = param
	}
	if code != "" {
		e["code"] = code
	}
	data, _ := json.Marshal(map[string]any{"error": e})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// authorized checks the key (and Azure's api-version), answering when it
// refuses.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if s.opt.Azure && r.URL.Query().Get("api-version") == "" {
		refuse(w, http.StatusNotFound, "", "", "404", "Resource not found")
		return false
	}
	if s.opt.Key == "" {
		return true
	}
	got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if s.opt.Azure {
		got = r.Header.Get("api-key")
	}
	if got == s.opt.Key {
		return true
	}
	if s.opt.Azure {
		refuse(w, http.StatusUnauthorized, "", "", "401", "Access denied due to invalid subscription key or wrong API endpoint. "+
			"Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.")
		return false
	}
	shown := got
	if len(shown) > 8 {
		shown = shown[:3] + "*****" + shown[len(shown)-4:]
	}
	refuse(w, http.StatusUnauthorized, "invalid_request_error", "", "invalid_api_key",
		fmt.Sprintf("Incorrect API key provided: %s. You can find your API key at https://platform.openai.com/account/api-keys.", shown))
	return false
}

// reasoningModel tells the API's reasoning models by name, as the API's
// documentation lists them (o1, o3, o4-mini, gpt-5, gpt-5-mini, gpt-5.1,
// dated and fine-tuned names, behind a provider's prefix), the chat
// variants (gpt-5-chat-latest) being ordinary models. It is the fake's own
// reading of the documentation, not the client's: a client that misjudges a
// model is refused here as the API would refuse it.
var reasoningName = regexp.MustCompile(`^(?:[a-z0-9_.-]+/)*(?:ft:)?(?:o[1-9]|gpt-[5-9])(?:$|[-_.:])`)

func reasoningModel(model string) bool {
	m := strings.ToLower(model)
	return reasoningName.MatchString(m) && !strings.Contains(m, "-chat")
}

// reasoningEfforts are the values the API takes for reasoning_effort.
var reasoningEfforts = []string{"none", "minimal", "low", "medium", "high"}

// checkRules refuses what the API refuses of a request, answering.
func (s *Server) checkRules(w http.ResponseWriter, b wireRequest) bool {
	if len(s.opt.Models) > 0 && !slices.Contains(s.opt.Models, b.Model) {
		refuse(w, http.StatusNotFound, "invalid_request_error", "", "model_not_found",
			fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", b.Model))
		return false
	}
	reasoning := reasoningModel(b.Model)
	if s.opt.Reasoning != nil {
		reasoning = s.opt.Reasoning(b.Model)
	}
	unsupported := func(param, msg string) bool {
		refuse(w, http.StatusBadRequest, "invalid_request_error", param, "unsupported_parameter", msg)
		return false
	}
	switch {
	case b.StreamOptions != nil && !b.Stream:
		refuse(w, http.StatusBadRequest, "invalid_request_error", "stream_options", "",
			"The 'stream_options' parameter is only allowed when 'stream' is enabled.")
		return false
	case b.Stream && s.opt.RefuseStream:
		refuse(w, http.StatusBadRequest, "invalid_request_error", "stream", "unsupported_value",
			"Your organization must be verified to stream this model. Please go to: https://platform.openai.com/settings/organization/general "+
				"and click on Verify Organization.")
		return false
	case reasoning && b.MaxTokens != 0:
		return unsupported("max_tokens", "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.")
	case reasoning && b.Temperature != nil && *b.Temperature != 1:
		refuse(w, http.StatusBadRequest, "invalid_request_error", "temperature", "unsupported_value",
			fmt.Sprintf("Unsupported value: 'temperature' does not support %g with this model. Only the default (1) value is supported.", *b.Temperature))
		return false
	case reasoning && b.TopP != nil && *b.TopP != 1:
		return unsupported("top_p", "Unsupported parameter: 'top_p' is not supported with this model.")
	case !reasoning && b.ReasoningEffort != "":
		return unsupported("reasoning_effort", "Unsupported parameter: 'reasoning_effort' is not supported with this model.")
	case b.ReasoningEffort != "" && !slices.Contains(reasoningEfforts, b.ReasoningEffort):
		refuse(w, http.StatusBadRequest, "invalid_request_error", "reasoning_effort", "invalid_value",
			fmt.Sprintf("Invalid value: '%s'. Supported values are: 'minimal', 'low', 'medium', and 'high'.", b.ReasoningEffort))
		return false
	}
	return true
}
