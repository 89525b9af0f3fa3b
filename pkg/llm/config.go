package llm

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/hpcq/hpcq/internal/config"
)

// FromConfig builds the scheduler's client from its settings: the replay
// cassette when one is set, else the OpenAI-compatible endpoint (recording
// to a cassette when asked). The second value closes what was opened.
func FromConfig(c config.LLM, log *slog.Logger) (Client, func() error, error) {
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
	live, err := NewOpenAI(OpenAIOptions{BaseURL: c.BaseURL, APIKey: c.APIKey, Model: c.Model, Timeout: c.Timeout,
		MaxAttempts: c.MaxAttempts, Concurrency: c.Concurrency, Logger: log})
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
