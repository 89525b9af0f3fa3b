package memory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/hpcq/hpcq/internal/textcut"
)

// Compressor shortens text to about targetChars, keeping what matters for
// hint (the LLM does it, with the seed's compression prompt).
type Compressor interface {
	Compress(ctx context.Context, text string, targetChars int, hint string) (string, error)
}

// Pinned core keys: rendered first and left out for budget only last.
var Pinned = []string{"IDEA_SUMMARY", "PHASE0_SUMMARY", "RESOURCE_INDEX", "CURRENT_STAGE"}

// Section names of a rendered memory.
const (
	SectionCore      = "core"
	SectionRecall    = "recall"
	SectionArchival  = "archival"
	SectionResources = "resources"
)

// sectionShares split a render budget; a section that needs less than its
// share passes the rest to the sections after it.
var sectionShares = [...]struct {
	name  string
	share float64
}{{SectionResources, 0.10}, {SectionCore, 0.40}, {SectionRecall, 0.30}, {SectionArchival, 0.20}}

// MinSectionChars is the least a section gets, enough for its title and a
// marker saying it was cut; a render budget below 4 of these is an error.
const MinSectionChars = 100

// SectionInfo says what happened to one section.
type SectionInfo struct {
	Name       string
	Budget     int
	Chars      int
	Compressed bool
	Truncated  bool
	// LeftOut names core keys left out for budget.
	LeftOut []string
	// Degraded: archival hits shown at detail L1 or L0 to fit.
	Degraded int
}

// Rendered is the memory of a branch as put into a prompt.
type Rendered struct {
	Text     string
	Sections []SectionInfo
}

// compressCache keeps compressions by (text hash, target, hint).
type compressCache struct {
	mu sync.Mutex
	m  map[string]string
}

const compressCacheMax = 4096

func (c *compressCache) key(text string, target int, hint string) string {
	h := sha256.Sum256([]byte(text))
	return hex.EncodeToString(h[:]) + fmt.Sprintf("/%d/", target) + hint
}

func (c *compressCache) get(k string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *compressCache) put(k, v string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= compressCacheMax {
		c.m = map[string]string{} // a full cache starts over: simple and bounded
	}
	c.m[k] = v
}

// RenderForPrompt renders the branch's memory within budgetChars (0: the
// memory_budget_chars setting): resources, core, recall (summary and the
// window) and archival hits for taskHint, each within its share. A section
// over its share is compressed (cached, up to max_compression_iterations
// rounds) and, if that fails or still overflows, truncated with a visible
// marker. A section cut to nothing says so.
//
// Long: the sections in the order the prompt shows them, each with its share
// of the budget; the shares depend on what the sections before them used.
func (m *Memory) RenderForPrompt(ctx context.Context, branch, taskHint string, budgetChars int) (Rendered, error) {
	start := time.Now()
	if budgetChars <= 0 {
		budgetChars = m.cfg.MemoryBudgetChars
	}
	if budgetChars < MinSectionChars*len(sectionShares) {
		return Rendered{}, fmt.Errorf("%w: RenderForPrompt: budget of %d chars, at least %d", ErrInvalid, budgetChars, MinSectionChars*len(sectionShares))
	}
	// Core, summary and window in one read (one round trip on the cluster
	// store).
	v, err := ReadView(ctx, m.store, ViewParams{Branch: branch, Events: m.cfg.RecallMaxEvents, Core: true})
	if err != nil {
		return Rendered{}, err
	}
	sum, window := v.Summary, v.Events
	var resources string
	rest := make([]CoreEntry, 0, len(v.Core))
	for _, e := range v.Core {
		if e.Key == "RESOURCE_INDEX" {
			resources = e.Value
			continue
		}
		rest = append(rest, e)
	}
	var hits []ArchivalItem
	if strings.TrimSpace(taskHint) != "" {
		if hits, err = m.search(ctx, ArchivalSearchParams{Branch: branch, Query: taskHint, K: m.cfg.RetrievalK}); err != nil {
			return Rendered{}, err
		}
	}

	out := Rendered{Sections: make([]SectionInfo, 0, len(sectionShares))}
	// Each section is "title\nbody\n" (or that cut to its budget: cut),
	// written into one text once all are known: one allocation of the
	// text's size.
	var parts [len(sectionShares)]struct {
		title, body string
		cut         bool
	}
	written, carry := 0, 0
	for i, s := range sectionShares {
		budget := max(MinSectionChars, int(float64(budgetChars)*s.share)) + carry
		// Never eat into the minimum of the sections still to come.
		budget = min(budget, budgetChars-written-MinSectionChars*(len(sectionShares)-1-i))
		if i == len(sectionShares)-1 {
			budget = budgetChars - written // whatever is left
		}
		var title, body string
		info := SectionInfo{Name: s.name}
		switch s.name {
		case SectionResources:
			title, body = "## Resources", resources
			if body == "" {
				body = "(no resource index)"
			}
		case SectionCore:
			title = "## Core memory"
			limit := min(budget-len(title)-1, m.cfg.CoreMaxChars)
			body, info.LeftOut = renderCore(m.capValues(rest), limit)
		case SectionRecall:
			title, body = "## Recall: summary and recent events", renderRecall(sum, window)
		case SectionArchival:
			title = "## Archival memory relevant to: " + textcut.OneLine(taskHint, 40)
			body = renderArchival(hits)
			if strings.TrimSpace(taskHint) == "" {
				body = "(no task hint: nothing searched)"
			}
		}
		room := budget - len(title) - 2
		if s.name == SectionArchival {
			if cap := m.cfg.SectionBudgets["archival_snippet"]; cap > 0 {
				room = min(room, cap)
			}
			if len(body) > room && len(hits) > 0 && strings.TrimSpace(taskHint) != "" {
				body, info.Degraded = renderArchivalWithin(hits, room)
			}
		}
		body, info = m.fit(ctx, body, room, taskHint, info)
		n := len(title) + len(body) + 2
		parts[i].title, parts[i].body = title, body
		if n > budget { // only a title longer than its budget
			section := title + "\n" + body + "\n"
			n = textcut.Floor(section, budget)
			parts[i].title, parts[i].body, parts[i].cut = section[:n], "", true
		}
		info.Budget, info.Chars = budget, n
		written += n
		carry = max(0, budget-n)
		out.Sections = append(out.Sections, info)
	}
	var text strings.Builder
	text.Grow(written)
	for _, p := range parts {
		text.WriteString(p.title)
		if !p.cut {
			text.WriteByte('\n')
			text.WriteString(p.body)
			text.WriteByte('\n')
		}
	}
	out.Text = text.String()
	m.record(branch, "render", start, taskHint, out.Text, len(out.Sections), nil)
	return out, nil
}

// valueBudgets maps pinned core keys to their section_budgets key.
var valueBudgets = map[string]string{"IDEA_SUMMARY": "idea_summary", "PHASE0_SUMMARY": "phase0_summary"}

// capValues cuts the values of IDEA_SUMMARY and PHASE0_SUMMARY to their
// section_budgets (idea_summary, phase0_summary), with a visible marker.
func (m *Memory) capValues(entries []CoreEntry) []CoreEntry {
	out := make([]CoreEntry, len(entries))
	for i, e := range entries {
		if key, ok := valueBudgets[e.Key]; ok {
			if limit := m.cfg.SectionBudgets[key]; limit > 0 && len(e.Value) > limit {
				keep := textcut.Floor(e.Value, limit)
				e.Value = e.Value[:keep] + fmt.Sprintf(" [... %s cut to its budget of %d chars ...]", key, limit)
			}
		}
		out[i] = e
	}
	return out
}

// Shorten brings text within room characters as a section over its budget
// is: as it is, compressed by the model (use_llm_compression), or cut with
// a marker. hint says what the text is.
func (m *Memory) Shorten(ctx context.Context, text string, room int, hint string) string {
	out, _ := m.fit(ctx, text, room, hint, SectionInfo{})
	return out
}

// fit brings body within room: as it is, compressed, or truncated.
func (m *Memory) fit(ctx context.Context, body string, room int, hint string, info SectionInfo) (string, SectionInfo) {
	if len(body) <= room {
		return body, info
	}
	if room < 80 {
		info.Truncated = true
		return fmt.Sprintf("[section cut to nothing: %d chars, budget %d]", len(body), max(room, 0)), info
	}
	if c := m.opts.Compressor; c != nil {
		text := body
		for range m.cfg.MaxCompressionIterations {
			k := m.cache.key(text, room, hint)
			out, ok := m.cache.get(k)
			if !ok {
				var err error
				out, err = c.Compress(ctx, text, room, hint)
				if err != nil {
					m.opts.Logger.Warn("memory compression failed; truncating", "err", err)
					break
				}
				m.cache.put(k, out)
			}
			info.Compressed = true
			if len(out) <= room {
				return out, info
			}
			if len(out) >= len(text) {
				break // no progress
			}
			text = out
		}
	}
	info.Truncated = true
	suffix := func(keep int) string {
		return fmt.Sprintf("\n[... truncated: %d of %d chars shown ...]", keep, len(body))
	}
	keep := textcut.Floor(body, max(0, room-len(suffix(len(body)))))
	return body[:keep] + suffix(keep), info
}

func isPinned(k string) bool {
	for _, p := range Pinned {
		if p == k {
			return true
		}
	}
	return false
}

// renderCore lists entries within limit: pinned keys first, then by
// importance, then the newest; over the limit the lowest importance, then
// the oldest, is left out, and the render says which keys.
func renderCore(entries []CoreEntry, limit int) (string, []string) {
	if len(entries) == 0 {
		return "(empty)", nil
	}
	sorted := append([]CoreEntry(nil), entries...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if pa, pb := isPinned(a.Key), isPinned(b.Key); pa != pb {
			return pa
		}
		if a.Importance != b.Importance {
			return a.Importance > b.Importance
		}
		return a.Seq > b.Seq
	})
	lines := make([]string, len(sorted))
	total := 0
	for i, e := range sorted {
		lines[i] = fmt.Sprintf("- %s (importance %d): %s", e.Key, e.Importance, e.Value)
		total += len(lines[i]) + 1
	}
	var left []string
	for total > limit && len(lines) > 0 {
		last := len(lines) - 1
		total -= len(lines[last]) + 1
		left = append(left, sorted[last].Key)
		lines = lines[:last]
		if len(left) == 1 {
			total += 80 // room for the note
		}
	}
	if len(left) > 0 {
		sort.Strings(left)
		lines = append(lines, fmt.Sprintf("[%d core entries left out for budget: %s]", len(left), textcut.OneLine(strings.Join(left, ", "), 60)))
	}
	return strings.Join(lines, "\n"), left
}

func renderRecall(sum RecallSummary, window []RecallEvent) string {
	size := len(sum.Text) + 40
	for _, e := range window {
		size += 48 + len(e.Kind) + len(e.NodeID) + len(e.Phase) + min(len(e.Payload), recallPayloadChars+3)
	}
	b := make([]byte, 0, size) // returned as the string: no copy
	if sum.Text != "" {
		b = append(b, "Summary of earlier events: "...)
		b = append(b, sum.Text...)
		b = append(b, '\n')
	}
	if len(window) == 0 {
		b = append(b, "(no events)"...)
		return unsafe.String(unsafe.SliceData(b), len(b))
	}
	for _, e := range window {
		b = append(b, "- "...)
		b = e.TS.UTC().AppendFormat(b, "2006-01-02T15:04:05Z")
		b = append(b, ' ')
		b = append(b, e.Kind...)
		if e.NodeID != "" {
			b = append(b, " node="...)
			b = append(b, e.NodeID...)
		}
		if e.Phase != "" {
			b = append(b, " phase="...)
			b = append(b, e.Phase...)
		}
		b = append(b, ": "...)
		b = textcut.AppendOneLine(b, e.Payload, recallPayloadChars)
		b = append(b, '\n')
	}
	return strings.TrimRight(unsafe.String(unsafe.SliceData(b), len(b)), "\n") // b is not used again
}

// recallPayloadChars bounds an event's payload in the rendered window.
const recallPayloadChars = 600

func renderArchival(hits []ArchivalItem) string {
	if len(hits) == 0 {
		return "(no matching archival memory)"
	}
	levels := make([]Level, len(hits))
	for i := range levels {
		levels[i] = L2
	}
	return archivalAt(hits, levels)
}

func archivalAt(hits []ArchivalItem, levels []Level) string {
	lines := make([]string, len(hits))
	for i, h := range hits {
		lines[i] = factAt(h.Text, h.Tags, h.Count, levels[i], maxHitChars)
		if levels[i] == L0 {
			lines[i] = "- " + lines[i] // a list item, as the others are
		}
	}
	return strings.Join(lines, "\n")
}

// maxHitChars bounds one hit's text in full detail.
const maxHitChars = 2000

// renderArchivalWithin renders the hits (best first) within room when it
// can by lowering their detail, the weakest hits first: each to L1 (short
// hash, first words, tags), then each to L0 (short hash and title). The
// best hits keep their whole text longest. It returns how many hits are
// below L2; what is still over room is left to fit.
func renderArchivalWithin(hits []ArchivalItem, room int) (string, int) {
	levels := make([]Level, len(hits))
	for i := range levels {
		levels[i] = L2
	}
	body := archivalAt(hits, levels)
	degraded := 0
	for _, to := range []Level{L1, L0} {
		for i := len(hits) - 1; i >= 0 && len(body) > room; i-- {
			if levels[i] == L2 {
				degraded++
			}
			levels[i] = to
			body = archivalAt(hits, levels)
		}
	}
	return body, degraded
}
