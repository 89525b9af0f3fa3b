package stores_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/fakellm"
	"github.com/hpcq/hpcq/internal/stores"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/llm"
)

// TestLLM: the settings choose a live endpoint (recording to a cassette
// when asked) or the cassette's replay; contradictory or missing settings
// are refused with the variable to set.
func TestLLM(t *testing.T) {
	f := fakellm.New(t, func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Content: "live"} })
	dir := t.TempDir()
	cassette := filepath.Join(dir, "c.jsonl")
	ask := llm.Request{Messages: []llm.Message{{Role: "user", Content: "q"}}}
	c, closeFn, err := stores.LLM(config.LLM{BaseURL: f.BaseURL(), APIKey: "sk-x", Model: "m", Record: cassette, MaxAttempts: 1}, llm.RunSettings{}, testutil.Logger(t))
	require.NoError(t, err)
	resp, err := c.Chat(context.Background(), ask)
	require.NoError(t, err)
	require.Equal(t, "live", resp.Content)
	require.NoError(t, closeFn())

	c, _, err = stores.LLM(config.LLM{Replay: cassette}, llm.RunSettings{}, nil)
	require.NoError(t, err)
	resp, err = c.Chat(context.Background(), ask)
	require.NoError(t, err)
	require.Equal(t, "live", resp.Content)
	require.True(t, resp.CacheHit)

	_, _, err = stores.LLM(config.LLM{Replay: cassette, Record: cassette}, llm.RunSettings{}, nil)
	require.ErrorContains(t, err, "together")
	_, _, err = stores.LLM(config.LLM{}, llm.RunSettings{}, nil)
	require.ErrorContains(t, err, "HPCQ_LLM_MODEL")
	_, _, err = stores.LLM(config.LLM{Replay: filepath.Join(dir, "missing.jsonl")}, llm.RunSettings{}, nil)
	require.Error(t, err)
	_, err = stores.LLMOptions(config.LLM{Model: "m", Reasoning: "maybe"}, llm.RunSettings{})
	require.ErrorContains(t, err, "HPCQ_LLM_REASONING")

	t.Setenv("OPENAI_API_KEY", "sk-env")
	t.Setenv("HPCQ_LLM_MODEL", "env-model")
	l, err := config.LoadLLM()
	require.NoError(t, err)
	require.Equal(t, "sk-env", l.APIKey)
	require.Equal(t, "env-model", l.Model)
	require.Equal(t, 5, l.MaxAttempts)
}
