package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// TestLLMTokens: a call's tokens are counted in and out, and the reasoning
// part of out under direction="reasoning" (only when there is some).
func TestLLMTokens(t *testing.T) {
	m := NewScheduler(NewRegistry())
	m.Call("draft", "gpt-5.2", 1000, 600, 500, 0.01, time.Second, false)
	m.Call("judge", "gpt-4o-mini", 10, 5, 0, 0, time.Second, false)
	require.Equal(t, 1000.0, testutil.ToFloat64(m.LLMTokens.WithLabelValues("draft", "gpt-5.2", "in")))
	require.Equal(t, 600.0, testutil.ToFloat64(m.LLMTokens.WithLabelValues("draft", "gpt-5.2", "out")))
	require.Equal(t, 500.0, testutil.ToFloat64(m.LLMTokens.WithLabelValues("draft", "gpt-5.2", "reasoning")))
	require.Equal(t, 5, testutil.CollectAndCount(m.LLMTokens), "no reasoning series for a model without reasoning")
}
