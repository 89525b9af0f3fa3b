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

// TestGPUsInUse: the worker's GPUs, and what each pool's tasks hold of
// them (shares add up; a pool with none running shows 0).
func TestGPUsInUse(t *testing.T) {
	m := NewWorker(NewRegistry())
	m.SetGPUs(2, map[string]float64{"gpu": 1.5}, []string{"gpu", "cpu"})
	require.Equal(t, 2.0, testutil.ToFloat64(m.GPUs))
	require.Equal(t, 1.5, testutil.ToFloat64(m.GPUsInUse.WithLabelValues("gpu")))
	require.Equal(t, 0.0, testutil.ToFloat64(m.GPUsInUse.WithLabelValues("cpu")))
	m.SetGPUs(2, map[string]float64{}, []string{"gpu", "cpu"})
	require.Equal(t, 0.0, testutil.ToFloat64(m.GPUsInUse.WithLabelValues("gpu")), "given back")
	var none *Worker
	none.SetGPUs(1, nil, nil) // a worker without metrics
}
