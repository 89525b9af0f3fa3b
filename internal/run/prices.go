package run

import (
	"fmt"
	"slices"
	"strings"
)

// AskedModels are the models a run's requests name: model (the run's,
// after the environment's HPCQ_LLM_MODEL), the VLM and the memory's
// compression model when they are others; each once.
func (s Spec) AskedModels(model string) []string {
	var out []string
	for _, m := range []string{model, s.LLM.VLMModel, s.Memory.CompressionModel} {
		if m != "" && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// Unpriced are the models of AskedModels(model) no price of llm.prices
// resolves to (serves: the model an Azure deployment serves, tried after
// the deployment's name).
func (s Spec) Unpriced(model, serves string) []string {
	var out []string
	for _, m := range s.AskedModels(model) {
		names := []string{m}
		if m == model {
			names = append(names, serves)
		}
		if _, ok := s.LLM.Prices.Resolve(names...); !ok {
			out = append(out, m)
		}
	}
	return out
}

// CheckBudgetPriced refuses a cost budget (llm.budget.max_cost_usd) that
// could not be enforced: a model the run asks has no price.
func (s Spec) CheckBudgetPriced(model, serves string) error {
	if s.LLM.Budget.MaxCostUSD <= 0 {
		return nil
	}
	if u := s.Unpriced(model, serves); len(u) > 0 {
		return fmt.Errorf("%w: llm.budget.max_cost_usd is $%g, but no price in llm.prices resolves to %s: the budget could not be enforced "+
			"(add llm.prices.%s: {in_per_mtok: ..., out_per_mtok: ...}; an endpoint's dated snapshot, gpt-4o-mini-2024-07-18, takes the price "+
			"of gpt-4o-mini; on Azure set HPCQ_LLM_SERVES to the deployment's model)", ErrSpec, s.LLM.Budget.MaxCostUSD, strings.Join(u, ", "), u[0])
	}
	return nil
}

// PriceLine says, for `scheduler check`, the price each model the run
// asks takes, or that it has none (and what that does to a cost budget).
func (s Spec) PriceLine(model, serves string) string {
	var parts []string
	for _, m := range s.AskedModels(model) {
		names := []string{m}
		if m == model {
			names = append(names, serves)
		}
		name, ok := s.LLM.Prices.Resolve(names...)
		if !ok {
			parts = append(parts, m+": none (its calls' cost will not be known)")
			continue
		}
		p := s.LLM.Prices[name]
		parts = append(parts, fmt.Sprintf("%s: $%g in, $%g out per million tokens (llm.prices.%s; dated snapshots of it too)", m, p.InPerMTok, p.OutPerMTok, name))
	}
	line := strings.Join(parts, "; ")
	if err := s.CheckBudgetPriced(model, serves); err != nil {
		line += fmt.Sprintf("; the budget of $%g cannot be enforced: a run refuses to start", s.LLM.Budget.MaxCostUSD)
	}
	return line
}
