package run

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/llm"
)

// TestBudgetNeedsPrices: a cost budget needs a price for every model the
// run asks (its own, the VLM, the compression model); a dated snapshot or
// an Azure deployment's served model finds its price; without a budget an
// unpriced model is only said.
func TestBudgetNeedsPrices(t *testing.T) {
	var s Spec
	s.LLM.Prices = llm.Prices{"gpt-4o-mini": {InPerMTok: 0.15, OutPerMTok: 0.6}}
	s.LLM.Budget.MaxCostUSD = 1
	require.NoError(t, s.CheckBudgetPriced("gpt-4o-mini-2024-07-18", ""))
	require.NoError(t, s.CheckBudgetPriced("my-deployment", "gpt-4o-mini"))
	err := s.CheckBudgetPriced("my-deployment", "")
	require.ErrorIs(t, err, ErrSpec)
	require.Contains(t, err.Error(), "no price in llm.prices resolves to my-deployment")
	s.LLM.VLMModel, s.Memory.CompressionModel = "gpt-4o", "gpt-4o-mini"
	require.Equal(t, []string{"gpt-4o-mini", "gpt-4o"}, s.AskedModels("gpt-4o-mini"))
	require.Equal(t, []string{"gpt-4o"}, s.Unpriced("gpt-4o-mini", ""))
	require.Contains(t, s.PriceLine("gpt-4o-mini", ""), "gpt-4o: none (its calls' cost will not be known); the budget of $1 cannot be enforced")
	s.LLM.Budget.MaxCostUSD = 0
	require.NoError(t, s.CheckBudgetPriced("house-model", ""))
	require.Equal(t, "house-model: none (its calls' cost will not be known); gpt-4o: none (its calls' cost will not be known); "+
		"gpt-4o-mini: $0.15 in, $0.6 out per million tokens (llm.prices.gpt-4o-mini; dated snapshots of it too)", s.PriceLine("house-model", ""))
}
