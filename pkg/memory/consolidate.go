package memory

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Seed 004, V1: decay, forgetting and consolidation on top of any Store.
// Ranking weighs a fact by its strength (Strength: confidence from its
// repeats times its decay since last seen; the stores rank with it); the
// Memory leaves out of searches and prompts the facts weaker than
// forget_below; a sweep turns repeated episodes into semantic facts.

// search is the store's search without the facts too weak to keep.
func (m *Memory) search(ctx context.Context, p ArchivalSearchParams) ([]ArchivalItem, error) {
	hits, err := m.store.ArchivalSearch(ctx, p)
	if err != nil || m.cfg.ForgetBelow <= 0 {
		return hits, err
	}
	now := m.opts.Now()
	out := hits[:0]
	for _, h := range hits {
		if Strength(h.Count, h.LastSeen, now, m.cfg.HalfLife()) >= m.cfg.ForgetBelow {
			out = append(out, h)
		}
	}
	return out, nil
}

// SemanticTag marks a consolidated fact; its "fact:<hash>" tag finds it.
const SemanticTag = "SEMANTIC"

// notEpisodes are recall kinds that are bookkeeping, not experience (a
// phase's start is its commands, which code_generated and the code say).
var notEpisodes = map[string]bool{EventMemoryContextInjected: true, EventNodeCreated: true, EventPhaseStarted: true}

// timings are what differs between two sightings of the same episode.
var timings = regexp.MustCompile(` in \d+ ms\b`)

// episodeFact is what an episode says, without when or how long: its
// kind, phase and payload less the durations.
func episodeFact(ev RecallEvent) string {
	kind := ev.Kind
	if ev.Phase != "" {
		kind += " (" + ev.Phase + ")"
	}
	return "[SEMANTIC] " + kind + ": " + timings.ReplaceAllString(ev.Payload, "")
}

// Consolidated is one semantic fact a sweep wrote or strengthened.
type Consolidated struct {
	Branch   string
	Text     string
	Episodes int
	// Added: observations added by this sweep (the fact's count rose to
	// Episodes).
	Added int
}

// Consolidate turns the branch's repeated episodes into semantic facts:
// recall events with the same kind, phase and payload (less durations:
// the same fact hash) seen
// consolidate_min_episodes times or more in the branch's visible
// timeline become one archival fact "[SEMANTIC] kind (phase): payload" (tags
// SEMANTIC, kind:<kind>, fact:<hash>) whose count is the number of
// episodes, so its confidence (1 - 0.5^episodes) ranks it. Sweeping again
// only adds the episodes seen since; a descendant's sweep adds its own to
// what it inherited, in its branch.
func (m *Memory) Consolidate(ctx context.Context, branch string) ([]Consolidated, error) {
	start := time.Now()
	out, err := m.consolidate(ctx, branch)
	m.record(branch, "consolidate", start, "", fmt.Sprint(len(out)), len(out), err)
	return out, err
}

func (m *Memory) consolidate(ctx context.Context, branch string) ([]Consolidated, error) {
	least := m.cfg.ConsolidateMinEpisodes
	if least <= 0 {
		least = Defaults().ConsolidateMinEpisodes
	}
	evs, _, err := m.store.RecallList(ctx, RecallListParams{Branch: branch})
	if err != nil {
		return nil, err
	}
	type group struct {
		text string
		kind string
		n    int
	}
	var order []string
	groups := map[string]*group{}
	for _, ev := range evs {
		if notEpisodes[ev.Kind] || strings.TrimSpace(ev.Payload) == "" {
			continue
		}
		text := episodeFact(ev)
		h := FactHash(text)
		g := groups[h]
		if g == nil {
			g = &group{text: text, kind: ev.Kind}
			groups[h] = g
			order = append(order, h)
		}
		g.n++
	}
	var out []Consolidated
	for _, h := range order {
		g := groups[h]
		if g.n < least {
			continue
		}
		tags := []string{SemanticTag, "kind:" + g.kind, "fact:" + h[:12]}
		have := 0
		hits, err := m.store.ArchivalSearch(ctx, ArchivalSearchParams{Branch: branch, Query: g.text, Tags: []string{SemanticTag, "fact:" + h[:12]}, K: 1})
		if err != nil {
			return out, err
		}
		if len(hits) > 0 {
			have = hits[0].Count
		}
		if have >= g.n {
			continue
		}
		for range g.n - have {
			if _, _, err := m.store.ArchivalWrite(ctx, ArchivalWriteParams{Branch: branch, Text: g.text, Tags: tags,
				Context: fmt.Sprintf("consolidated from %d recall events", g.n)}); err != nil {
				return out, err
			}
		}
		out = append(out, Consolidated{Branch: branch, Text: g.text, Episodes: g.n, Added: g.n - have})
	}
	return out, nil
}
