package llm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Price is what a model costs, in US dollars per million tokens.
type Price struct {
	InPerMTok  float64 `json:"in_per_mtok" yaml:"in_per_mtok"`
	OutPerMTok float64 `json:"out_per_mtok" yaml:"out_per_mtok"`
	// CachedInPerMTok is the price of the prompt tokens an endpoint served
	// from its prompt cache; 0: they cost InPerMTok.
	CachedInPerMTok float64 `json:"cached_in_per_mtok,omitempty" yaml:"cached_in_per_mtok,omitempty"`
}

// Prices maps model names to prices; a model without one costs 0 (and is
// logged once).
type Prices map[string]Price

// Cost of a completion of in prompt tokens (cached of them from the
// endpoint's prompt cache) and out completion tokens (reasoning included:
// it is billed as output).
func (p Prices) Cost(model string, in, cached, out int) (float64, bool) {
	pr, ok := p[model]
	if !ok {
		return 0, false
	}
	cachedPrice := pr.CachedInPerMTok
	if cachedPrice == 0 {
		cachedPrice = pr.InPerMTok
	}
	cached = min(max(cached, 0), in)
	return (float64(in-cached)*pr.InPerMTok + float64(cached)*cachedPrice + float64(out)*pr.OutPerMTok) / 1e6, true
}

// Budget limits a run's LLM use; zero fields are unlimited.
type Budget struct {
	MaxCostUSD float64 `json:"max_cost_usd" yaml:"max_cost_usd"`
	MaxTokens  int64   `json:"max_tokens" yaml:"max_tokens"`
}

// ErrBudget: the run's budget is spent; no new request is sent.
var ErrBudget = errors.New("llm: budget spent")

// Usage totals.
type Usage struct {
	Calls     int64
	TokensIn  int64
	TokensOut int64
	// TokensReasoning (of TokensOut) and TokensCached (of TokensIn).
	TokensReasoning int64 `json:",omitempty"`
	TokensCached    int64 `json:",omitempty"`
	CostUSD         float64
	Errors          int64
	CacheHits       int64
}

// Call is one request as Metered records it (an llm_calls row).
type Call struct {
	Run, Node, Purpose, Model string
	TokensIn, TokensOut       int64
	// TokensReasoning (of TokensOut) and TokensCached (of TokensIn);
	// TokensEstimated: counted here, the endpoint reported none.
	TokensReasoning, TokensCached int64
	TokensEstimated               bool
	Latency                       time.Duration
	CostUSD                       float64
	CacheHit                      bool
	// Error is the request's error, "" when it succeeded.
	Error   string
	Started time.Time
}

// Metered wraps a client: it records every call (Record; the engine writes
// them to llm_calls), adds up usage and cost, and refuses new requests
// once the budget is spent (requests already sent finish).
type Metered struct {
	Client Client
	// Record receives every call sent, after it returned; nil: not
	// recorded. It is called with a context that is not canceled.
	Record func(ctx context.Context, c Call)
	Run    string
	Prices Prices
	Budget Budget
	Logger *slog.Logger
	// OnConfigError is called once, with the error, when the endpoint
	// refuses the configuration (ErrConfig): the engine stops the run.
	OnConfigError func(error)

	configOnce sync.Once
	mu         sync.Mutex
	usage      Usage
	unpriced   map[string]bool
}

// Minus is the usage between an earlier total v and u.
func (u Usage) Minus(v Usage) Usage {
	return Usage{Calls: u.Calls - v.Calls, TokensIn: u.TokensIn - v.TokensIn, TokensOut: u.TokensOut - v.TokensOut,
		TokensReasoning: u.TokensReasoning - v.TokensReasoning, TokensCached: u.TokensCached - v.TokensCached,
		CostUSD: u.CostUSD - v.CostUSD, Errors: u.Errors - v.Errors, CacheHits: u.CacheHits - v.CacheHits}
}

// Usage returns the totals so far.
func (m *Metered) Usage() Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.usage
}

// Spent reports whether the budget is spent, and why.
func (m *Metered) Spent() (bool, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.spentLocked()
}

func (m *Metered) spentLocked() (bool, string) {
	u := m.usage
	if m.Budget.MaxCostUSD > 0 && u.CostUSD >= m.Budget.MaxCostUSD {
		return true, fmt.Sprintf("cost $%.4f reached the budget of $%.4f", u.CostUSD, m.Budget.MaxCostUSD)
	}
	if m.Budget.MaxTokens > 0 && u.TokensIn+u.TokensOut >= m.Budget.MaxTokens {
		return true, fmt.Sprintf("%d tokens reached the budget of %d", u.TokensIn+u.TokensOut, m.Budget.MaxTokens)
	}
	return false, ""
}

// Chat sends the request unless the budget is spent, and records it.
func (m *Metered) Chat(ctx context.Context, req Request) (Response, error) {
	m.mu.Lock()
	if spent, why := m.spentLocked(); spent {
		m.mu.Unlock()
		return Response{}, fmt.Errorf("%w: %s", ErrBudget, why)
	}
	m.mu.Unlock()
	start := time.Now()
	resp, err := m.Client.Chat(ctx, req)
	latency := resp.Latency
	if latency == 0 && !resp.CacheHit {
		latency = time.Since(start)
	}
	model := resp.Model
	if model == "" {
		model = req.Model
	}
	if err != nil && errors.Is(err, ErrConfig) && m.OnConfigError != nil {
		m.configOnce.Do(func() { m.OnConfigError(err) })
	}
	cost, priced := m.Prices.Cost(model, resp.TokensIn, resp.CachedTokens, resp.TokensOut)
	if resp.CacheHit {
		cost = 0 // a replayed reply costs nothing
	}
	m.mu.Lock()
	m.usage.Calls++
	if !resp.CacheHit {
		// The budget counts what the model was asked for: a reply served
		// again from a cache spends nothing.
		m.usage.TokensIn += int64(resp.TokensIn)
		m.usage.TokensOut += int64(resp.TokensOut)
		m.usage.TokensReasoning += int64(resp.ReasoningTokens)
		m.usage.TokensCached += int64(resp.CachedTokens)
	}
	m.usage.CostUSD += cost
	if err != nil {
		m.usage.Errors++
	}
	if resp.CacheHit {
		m.usage.CacheHits++
	}
	warn := !priced && err == nil && !resp.CacheHit && !m.unpriced[model]
	if warn {
		if m.unpriced == nil {
			m.unpriced = map[string]bool{}
		}
		m.unpriced[model] = true
	}
	m.mu.Unlock()
	if warn && m.Logger != nil {
		m.Logger.Warn("llm: no price for model; its calls count as $0", "model", model)
	}
	if m.Record != nil {
		c := Call{Run: m.Run, Node: req.Node, Purpose: req.Purpose, Model: model, TokensIn: int64(resp.TokensIn),
			TokensOut: int64(resp.TokensOut), TokensReasoning: int64(resp.ReasoningTokens), TokensCached: int64(resp.CachedTokens),
			TokensEstimated: resp.UsageEstimated, Latency: latency, CostUSD: cost, CacheHit: resp.CacheHit, Started: start}
		if err != nil {
			c.Error = err.Error()
		}
		m.Record(context.WithoutCancel(ctx), c)
	}
	return resp, err
}

// Restore adds usage spent earlier (by a run before it was resumed), so
// that the totals and the budget count it.
func (m *Metered) Restore(u Usage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.usage.Calls += u.Calls
	m.usage.TokensIn += u.TokensIn
	m.usage.TokensOut += u.TokensOut
	m.usage.TokensReasoning += u.TokensReasoning
	m.usage.TokensCached += u.TokensCached
	m.usage.CostUSD += u.CostUSD
	m.usage.Errors += u.Errors
	m.usage.CacheHits += u.CacheHits
}
