package stores

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/pkg/llm"
)

// LLM builds the scheduler's client from its settings: the replay
// cassette when one is set, else the OpenAI-compatible endpoint (recording
// to a cassette when asked). The second value closes what was opened.
func LLM(c config.LLM, rs llm.RunSettings, log *slog.Logger) (llm.Client, func() error, error) {
	noop := func() error { return nil }
	if c.Replay != "" {
		if c.Record != "" {
			return nil, noop, errors.New("llm: HPCQ_LLM_REPLAY and HPCQ_LLM_RECORD together: replay serves recorded replies, record needs a live model")
		}
		r, err := llm.OpenReplay(c.Replay)
		return r, noop, err
	}
	if c.Model == "" {
		return nil, noop, fmt.Errorf("%w: no model: set HPCQ_LLM_MODEL (with OPENAI_BASE_URL and OPENAI_API_KEY), or HPCQ_LLM_REPLAY to a cassette", llm.ErrBadRequest)
	}
	o, err := LLMOptions(c, rs)
	if err != nil {
		return nil, noop, err
	}
	o.Logger = log
	live, err := llm.NewOpenAI(o)
	if err != nil {
		return nil, noop, err
	}
	if c.Record == "" {
		return live, noop, nil
	}
	rec, err := llm.NewRecorder(live, c.Record)
	if err != nil {
		return nil, noop, err
	}
	return rec, rec.Close, nil
}

// LLMOptions are the endpoint client's options of the settings.
func LLMOptions(c config.LLM, rs llm.RunSettings) (llm.OpenAIOptions, error) {
	endpoint, err := llm.ParseEndpoint(c.Endpoint, c.BaseURL)
	if err != nil {
		return llm.OpenAIOptions{}, err
	}
	switch strings.ToLower(strings.TrimSpace(c.Reasoning)) {
	case "":
	case "true", "1", "yes":
		rs.Reasoning = new(true)
	case "false", "0", "no":
		rs.Reasoning = new(false)
	default:
		return llm.OpenAIOptions{}, fmt.Errorf("%w: HPCQ_LLM_REASONING %q: true or false", llm.ErrBadRequest, c.Reasoning)
	}
	return llm.OpenAIOptions{BaseURL: c.BaseURL, APIKey: c.APIKey, Model: c.Model, Endpoint: endpoint, APIVersion: c.APIVersion, Serves: c.Serves,
		Reasoning: rs.Reasoning, MaxTokensCap: rs.MaxTokensCap, NoStream: !c.Stream, IdleTimeout: c.IdleTimeout, Timeout: c.Timeout,
		MaxAttempts: c.MaxAttempts, Concurrency: c.Concurrency}, nil
}

// LLMProfile is what a client of the settings sends to their model.
func LLMProfile(c config.LLM, rs llm.RunSettings) (llm.Profile, error) {
	o, err := LLMOptions(c, rs)
	if err != nil {
		return llm.Profile{}, err
	}
	return o.Profile(), nil
}
