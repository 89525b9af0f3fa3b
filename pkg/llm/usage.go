package llm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
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

// Prices maps model names to prices; a call no price resolves to costs
// nothing known (Call.Unpriced, logged once; a cost budget then stops the
// run: it cannot be enforced).
type Prices map[string]Price

// snapshotRe is the date an endpoint appends to the model it answers
// with (gpt-4o-mini-2024-07-18, claude-3-5-sonnet-20241022).
var snapshotRe = regexp.MustCompile(`-(?:\d{4}-\d{2}-\d{2}|\d{8})$`)

// Resolve is the name of the price of a call, tried in the order given:
// the model the endpoint answered, the one the request named (an Azure
// deployment's name), the model a deployment serves; each as written, as
// its base model (a fine-tune's, ft:BASE:org::id, unless the fine-tune is
// priced itself), without a snapshot date, and without a proxy's provider
// prefix (openai/gpt-4o); names compared without regard to case. ok is
// false when none is priced.
func (p Prices) Resolve(names ...string) (string, bool) {
	if len(p) == 0 {
		return "", false
	}
	lower := make(map[string]string, len(p))
	for k := range p {
		lower[strings.ToLower(k)] = k
	}
	for _, name := range names {
		for _, c := range priceNames(strings.ToLower(strings.TrimSpace(name))) {
			if k, ok := lower[c]; ok {
				return k, true
			}
		}
	}
	return "", false
}

// priceNames are the names a model may be priced under, most specific first.
func priceNames(m string) []string {
	if m == "" {
		return nil
	}
	names := []string{m}
	if rest, ok := strings.CutPrefix(m, "ft:"); ok {
		base, _, _ := strings.Cut(rest, ":")
		names = append(names, base)
	}
	for _, n := range names {
		if i := strings.LastIndexByte(n, '/'); i >= 0 {
			names = append(names, n[i+1:])
		}
	}
	for _, n := range names {
		if d := snapshotRe.ReplaceAllString(n, ""); d != n {
			names = append(names, d)
		}
	}
	return names
}

// Cost of a completion of in prompt tokens (cached of them from the
// endpoint's prompt cache) and out completion tokens (reasoning included:
// it is billed as output), at the price Resolve finds for names.
func (p Prices) Cost(in, cached, out int, names ...string) (float64, bool) {
	name, ok := p.Resolve(names...)
	if !ok {
		return 0, false
	}
	pr := p[name]
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
	// Unpriced calls had no price (CostUSD leaves them out: their cost is
	// not known); Estimated calls had their tokens counted here (the
	// endpoint reported no usage).
	Unpriced  int64 `json:",omitempty"`
	Estimated int64 `json:",omitempty"`
	// Unanswered counts the replies that ended without an answer, by
	// "finish purpose" ("refusal draft", "length debug").
	Unanswered map[string]int64 `json:",omitempty"`
}

// Cost is the cost as a reader should read it: "$0.0123", and "+ 4
// unpriced calls" when some had no price (their cost is not in it).
func (u Usage) Cost() string {
	s := fmt.Sprintf("$%.4f", u.CostUSD)
	if u.Unpriced > 0 {
		s += fmt.Sprintf(" + %d unpriced calls", u.Unpriced)
	}
	return s
}

// Tokens is the tokens in and out as a count to show: "~" before it when
// some calls' tokens were estimated (the endpoint reported no usage).
func (u Usage) Tokens() string {
	if u.Estimated > 0 {
		return fmt.Sprintf("~%d", u.TokensIn+u.TokensOut)
	}
	return strconv.FormatInt(u.TokensIn+u.TokensOut, 10)
}

// Caveats says what a reader must know of the numbers beyond them: the
// calls whose tokens were estimated, those no price resolved to, the
// replies that ended without an answer by finish and purpose; "" when
// none.
func (u Usage) Caveats() string {
	var out []string
	if u.Estimated > 0 {
		out = append(out, fmt.Sprintf("the tokens of %d calls are estimates (the endpoint reported no usage; counted here with o200k_base)", u.Estimated))
	}
	if u.Unpriced > 0 {
		out = append(out, fmt.Sprintf("%d calls had no price in llm.prices: their cost is not known and not in the total", u.Unpriced))
	}
	if len(u.Unanswered) > 0 {
		keys := slices.Sorted(maps.Keys(u.Unanswered))
		parts := make([]string, len(keys))
		for i, k := range keys {
			finish, purpose, _ := strings.Cut(k, " ")
			parts[i] = fmt.Sprintf("%d %s (%s)", u.Unanswered[k], finish, purpose)
		}
		out = append(out, "replies without an answer: "+strings.Join(parts, ", "))
	}
	return strings.Join(out, "; ")
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
	// Unpriced: no price resolves to the model (CostUSD is 0 and not
	// known); FinishReason how the reply ended (Response.Finish: the
	// API's finish_reason, or refusal).
	Unpriced     bool
	FinishReason string
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
		CostUSD: u.CostUSD - v.CostUSD, Errors: u.Errors - v.Errors, CacheHits: u.CacheHits - v.CacheHits,
		Unpriced: u.Unpriced - v.Unpriced, Estimated: u.Estimated - v.Estimated, Unanswered: minusCounts(u.Unanswered, v.Unanswered)}
}

// minusCounts is a's counts less b's, those left above zero.
func minusCounts(a, b map[string]int64) map[string]int64 {
	var out map[string]int64
	for k, n := range a {
		if d := n - b[k]; d > 0 {
			if out == nil {
				out = map[string]int64{}
			}
			out[k] = d
		}
	}
	return out
}

// Usage returns the totals so far (its map a copy).
func (m *Metered) Usage() Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.usage
	u.Unanswered = maps.Clone(u.Unanswered)
	return u
}

// Spent reports whether the budget is spent, and why.
func (m *Metered) Spent() (bool, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.spentLocked()
}

func (m *Metered) spentLocked() (bool, string) {
	u := m.usage
	if m.Budget.MaxCostUSD > 0 && u.Unpriced > 0 {
		return true, fmt.Sprintf("the budget of $%.4f cannot be enforced: %d calls to %s had no price (add it to llm.prices)",
			m.Budget.MaxCostUSD, u.Unpriced, m.unpricedNames())
	}
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
	requested := cmp.Or(resp.Requested, req.Model)
	cost, priced := m.Prices.Cost(resp.TokensIn, resp.CachedTokens, resp.TokensOut, model, requested, resp.Serves)
	if resp.CacheHit {
		cost, priced = 0, true // a replayed reply costs nothing
	}
	// A call that failed before any token was counted cost nothing.
	unpriced := !priced && resp.TokensIn+resp.TokensOut > 0
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
	if unpriced {
		m.usage.Unpriced++
	}
	if resp.UsageEstimated && !resp.CacheHit {
		m.usage.Estimated++
	}
	if f := resp.Finish(); err == nil && f != "" && f != FinishStop {
		if m.usage.Unanswered == nil {
			m.usage.Unanswered = map[string]int64{}
		}
		m.usage.Unanswered[f+" "+cmp.Or(req.Purpose, "other")]++
	}
	warn := unpriced && !m.unpriced[model]
	if warn {
		if m.unpriced == nil {
			m.unpriced = map[string]bool{}
		}
		m.unpriced[model] = true
	}
	m.mu.Unlock()
	if warn && m.Logger != nil {
		m.Logger.Warn("llm: no price for the model in llm.prices; the cost of its calls is not known", "model", model, "requested", requested)
	}
	if m.Record != nil {
		c := Call{Run: m.Run, Node: req.Node, Purpose: req.Purpose, Model: model, TokensIn: int64(resp.TokensIn),
			TokensOut: int64(resp.TokensOut), TokensReasoning: int64(resp.ReasoningTokens), TokensCached: int64(resp.CachedTokens),
			TokensEstimated: resp.UsageEstimated, Latency: latency, CostUSD: cost, CacheHit: resp.CacheHit, Started: start,
			Unpriced: unpriced, FinishReason: resp.Finish()}
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
	m.usage.Unpriced += u.Unpriced
	m.usage.Estimated += u.Estimated
	for k, n := range u.Unanswered {
		if m.usage.Unanswered == nil {
			m.usage.Unanswered = map[string]int64{}
		}
		m.usage.Unanswered[k] += n
	}
}

// unpricedNames are the models seen without a price, sorted.
func (m *Metered) unpricedNames() string {
	names := make([]string, 0, len(m.unpriced))
	for n := range m.unpriced {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return "a model (before a resume)"
	}
	return strings.Join(names, ", ")
}
