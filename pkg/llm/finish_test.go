package llm

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/fakellm"
)

// TestFinishes: each way a reply may end without an answer, as OpenAI and
// Azure OpenAI send it (whole and streamed), is read as itself: a
// refusal's words, the content filter's category, a cut reply with its
// limit, tool calls nobody offered; a prompt Azure's filter refuses is
// ErrFiltered with its category.
func TestFinishes(t *testing.T) {
	t.Parallel()
	replies := map[string]fakellm.Reply{
		"refusal":  {Refusal: "I can't help with that request."},
		"filter":   {Content: `{"phase_arti`, FinishReason: "content_filter", Filter: fakellm.FilterResults("violence", "medium")},
		"filter0":  {Content: "", FinishReason: "content_filter"},
		"length":   {Content: `{"phase_artifacts": {"code": "int main(`, FinishReason: "length", TokensIn: 10, TokensOut: 64},
		"tools":    {Content: "", FinishReason: "tool_calls"},
		"prompt":   fakellm.PromptFiltered("hate", "high"),
		"ordinary": {Content: "fine"},
	}
	srv := fakellm.NewWith(t, fakellm.Options{Azure: true, Serves: "gpt-4o-2024-08-06"}, func(r fakellm.Request) fakellm.Reply {
		return replies[r.Last()]
	})
	for _, stream := range []bool{false, true} {
		c := newClient(t, srv.URL, OpenAIOptions{Endpoint: EndpointAzure, APIVersion: "2024-10-21", Model: "my-deployment", NoStream: !stream})
		chat := func(what string) (Response, error) {
			req := ask(what)
			req.MaxTokens = 64
			return c.Chat(context.Background(), req)
		}
		r, err := chat("refusal")
		require.NoError(t, err)
		require.Equal(t, FinishRefusal, r.Finish())
		require.ErrorIs(t, Unanswered(r), ErrRefused)
		require.Contains(t, Unanswered(r).Error(), "I can't help with that request.")
		require.Equal(t, "gpt-4o-2024-08-06", r.Model, "Azure answers with the model a deployment serves")
		require.Equal(t, "my-deployment", r.Requested)

		r, err = chat("filter")
		require.NoError(t, err)
		require.Equal(t, FinishContentFilter, r.Finish())
		require.ErrorIs(t, Unanswered(r), ErrFiltered)
		require.Contains(t, Unanswered(r).Error(), "violence (medium)")
		r, _ = chat("filter0")
		require.Contains(t, Unanswered(r).Error(), "no category")

		r, err = chat("length")
		require.NoError(t, err)
		require.ErrorIs(t, Unanswered(r), ErrCut)
		require.Contains(t, Unanswered(r).Error(), "at max_tokens 64; raise llm.max_tokens (to 128 or more")

		r, _ = chat("tools")
		require.ErrorIs(t, Unanswered(r), ErrToolCalls)

		_, err = chat("prompt")
		require.ErrorIs(t, err, ErrFiltered)
		require.Contains(t, err.Error(), "hate (high)")
		require.False(t, errors.Is(err, ErrConfig), "a filtered prompt is not the configuration's fault")

		r, err = chat("ordinary")
		require.NoError(t, err)
		require.NoError(t, Unanswered(r))
		require.Equal(t, FinishStop, r.Finish())
	}
}

// TestCutReplyAskedWithMore: with llm.max_tokens_cap above the limit, a
// reply cut with words said is asked once more with twice the limit.
func TestCutReplyAskedWithMore(t *testing.T) {
	t.Parallel()
	srv := fakellm.New(t, func(r fakellm.Request) fakellm.Reply {
		if r.MaxTokens < 200 {
			return fakellm.Reply{Content: "half a", FinishReason: "length", TokensOut: r.MaxTokens}
		}
		return fakellm.Reply{Content: "a whole reply", TokensOut: 20}
	})
	req := ask("x")
	req.MaxTokens = 100
	r, err := newClient(t, srv.URL+"/v1", OpenAIOptions{MaxTokensCap: 400}).Chat(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, "a whole reply", r.Content)
	require.Equal(t, 200, r.Limit)
	require.Contains(t, r.Note, "the reply was cut at max_tokens 100 (100 tokens); asked again with 200")
	require.Equal(t, 120, r.TokensOut, "both rounds' tokens are billed")

	r, err = newClient(t, srv.URL+"/v1", OpenAIOptions{}).Chat(context.Background(), req)
	require.NoError(t, err)
	require.ErrorIs(t, Unanswered(r), ErrCut, "without a cap, a chat model's limit is not raised: its output limit is not known")
}

// TestPricesResolve: a price is found for the dated snapshot an endpoint
// answers with, a fine-tune's base, a proxy's prefixed name, and an Azure
// deployment's name (the request's).
func TestPricesResolve(t *testing.T) {
	p := Prices{"gpt-4o-mini": {InPerMTok: 0.15, OutPerMTok: 0.6}, "gpt-5.2": {InPerMTok: 1.75, OutPerMTok: 14},
		"ft:gpt-4o-mini-2024-07-18:acme::tuned2": {InPerMTok: 0.3, OutPerMTok: 1.2}, "my-deployment": {InPerMTok: 2.5, OutPerMTok: 10}}
	for _, c := range []struct{ answered, requested, want string }{
		{"gpt-4o-mini-2024-07-18", "gpt-4o-mini", "gpt-4o-mini"},
		{"gpt-5.2-2025-12-11", "", "gpt-5.2"},
		{"ft:gpt-4o-mini-2024-07-18:acme::abc123", "ft:gpt-4o-mini-2024-07-18:acme::abc123", "gpt-4o-mini"},
		{"ft:gpt-4o-mini-2024-07-18:acme::tuned2", "", "ft:gpt-4o-mini-2024-07-18:acme::tuned2"},
		{"openai/GPT-4o-mini", "", "gpt-4o-mini"},
		{"gpt-4o-2024-08-06", "my-deployment", "my-deployment"},
	} {
		got, ok := p.Resolve(c.answered, c.requested)
		require.True(t, ok, c.answered)
		require.Equal(t, c.want, got, c.answered)
	}
	_, ok := p.Resolve("llama-3.1-70b", "llama-3.1-70b")
	require.False(t, ok)
	got, ok := p.Resolve("gpt-4o-2024-08-06", "other-deployment", "gpt-4o-mini")
	require.True(t, ok)
	require.Equal(t, "gpt-4o-mini", got, "the model a deployment serves (HPCQ_LLM_SERVES)")
	cost, ok := p.Cost(1_000_000, 0, 1_000_000, "gpt-4o-mini-2024-07-18", "gpt-4o-mini")
	require.True(t, ok)
	require.InDelta(t, 0.75, cost, 1e-12)
}

// TestDatedModelsPricedAndBudgeted: against an endpoint answering with
// dated snapshots, calls cost the requested model's price and a cost
// budget stops new requests; a model no price resolves to stops a budgeted
// run at once (its budget cannot be enforced) and is recorded unpriced.
func TestDatedModelsPricedAndBudgeted(t *testing.T) {
	t.Parallel()
	srv := fakellm.NewWith(t, fakellm.Options{Snapshot: "2024-07-18"}, func(r fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Content: "ok", TokensIn: 100_000, TokensOut: 10_000}
	})
	var calls []Call
	m := &Metered{Client: newClient(t, srv.URL+"/v1", OpenAIOptions{Model: "gpt-4o-mini"}), Prices: Prices{"gpt-4o-mini": {InPerMTok: 0.15, OutPerMTok: 0.6}},
		Budget: Budget{MaxCostUSD: 0.05}, Record: func(_ context.Context, c Call) { calls = append(calls, c) }}
	n := 0
	for ; n < 10; n++ {
		if _, err := m.Chat(context.Background(), ask("x")); err != nil {
			require.ErrorIs(t, err, ErrBudget)
			break
		}
	}
	require.Equal(t, 3, n, "$0.021 a call at the requested model's price: three reach the budget of $0.05, the fourth is refused")
	require.Equal(t, "gpt-4o-mini-2024-07-18", calls[0].Model)
	require.InDelta(t, 0.021, calls[0].CostUSD, 1e-12)
	require.False(t, calls[0].Unpriced)

	calls = nil
	m = &Metered{Client: newClient(t, srv.URL+"/v1", OpenAIOptions{Model: "llama-3.1-8b"}), Prices: Prices{"gpt-4o-mini": {InPerMTok: 0.15}},
		Budget: Budget{MaxCostUSD: 1}, Record: func(_ context.Context, c Call) { calls = append(calls, c) }}
	_, err := m.Chat(context.Background(), ask("x"))
	require.NoError(t, err)
	require.True(t, calls[0].Unpriced)
	_, err = m.Chat(context.Background(), ask("x"))
	require.ErrorIs(t, err, ErrBudget)
	require.Contains(t, err.Error(), "cannot be enforced: 1 calls to llama-3.1-8b-2024-07-18 had no price")
	require.Equal(t, int64(1), m.Usage().Unpriced)
}
