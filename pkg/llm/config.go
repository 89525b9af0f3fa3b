package llm

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/hpcq/hpcq/internal/config"
)

// RunSettings are the run's own settings of the endpoint client
// (run.yaml's llm section).
type RunSettings struct {
	// Reasoning overrides what the model's name says (llm.reasoning).
	Reasoning *bool
	// MaxTokensCap bounds the limit a reply cut by reasoning is asked
	// again with (llm.max_tokens_cap).
	MaxTokensCap int
}

// FromConfig builds the scheduler's client from its settings: the replay
// cassette when one is set, else the OpenAI-compatible endpoint (recording
// to a cassette when asked). The second value closes what was opened.
func FromConfig(c config.LLM, rs RunSettings, log *slog.Logger) (Client, func() error, error) {
	noop := func() error { return nil }
	if c.Replay != "" {
		if c.Record != "" {
			return nil, noop, errors.New("llm: HPCQ_LLM_REPLAY and HPCQ_LLM_RECORD together: replay serves recorded replies, record needs a live model")
		}
		r, err := OpenReplay(c.Replay)
		return r, noop, err
	}
	if c.Model == "" {
		return nil, noop, fmt.Errorf("%w: no model: set HPCQ_LLM_MODEL (with OPENAI_BASE_URL and OPENAI_API_KEY), or HPCQ_LLM_REPLAY to a cassette", ErrBadRequest)
	}
	o, err := Options(c, rs)
	if err != nil {
		return nil, noop, err
	}
	o.Logger = log
	live, err := NewOpenAI(o)
	if err != nil {
		return nil, noop, err
	}
	if c.Record == "" {
		return live, noop, nil
	}
	rec, err := NewRecorder(live, c.Record)
	if err != nil {
		return nil, noop, err
	}
	return rec, rec.Close, nil
}

// Options are the endpoint client's options of the settings.
func Options(c config.LLM, rs RunSettings) (OpenAIOptions, error) {
	endpoint, err := ParseEndpoint(c.Endpoint, c.BaseURL)
	if err != nil {
		return OpenAIOptions{}, err
	}
	switch strings.ToLower(strings.TrimSpace(c.Reasoning)) {
	case "":
	case "true", "1", "yes":
		rs.Reasoning = new(true)
	case "false", "0", "no":
		rs.Reasoning = new(false)
	default:
		return OpenAIOptions{}, fmt.Errorf("%w: HPCQ_LLM_REASONING %q: true or false", ErrBadRequest, c.Reasoning)
	}
	return OpenAIOptions{BaseURL: c.BaseURL, APIKey: c.APIKey, Model: c.Model, Endpoint: endpoint, APIVersion: c.APIVersion,
		Reasoning: rs.Reasoning, MaxTokensCap: rs.MaxTokensCap, NoStream: !c.Stream, IdleTimeout: c.IdleTimeout, Timeout: c.Timeout,
		MaxAttempts: c.MaxAttempts, Concurrency: c.Concurrency}, nil
}

// ProfileOf is what a client of the settings sends to their model.
func ProfileOf(c config.LLM, rs RunSettings) (Profile, error) {
	o, err := Options(c, rs)
	if err != nil {
		return Profile{}, err
	}
	if o.Endpoint == EndpointAzure && o.APIVersion == "" {
		o.APIVersion = azureVersion(o)
	}
	return Resolve(o.Endpoint, o.Model, o.Reasoning, !o.NoStream, o.APIVersion), nil
}
