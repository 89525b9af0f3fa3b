// A reply's memory operations applied to a branch (seed 001's protocol),
// and the follow-up rounds their results ask for.

package memory

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hpcq/hpcq/internal/jsonw"
)

// Results of the reads of an update, the JSON inside <memory_results>.
type Results struct {
	Core           map[string]*string `json:"core_get,omitempty"`
	ArchivalSearch []ResultItem       `json:"archival_search,omitempty"`
	RecallSearch   []ResultEvent      `json:"recall_search,omitempty"`
}

// ResultItem is an archival hit in <memory_results>.
type ResultItem struct {
	Text  string   `json:"text"`
	Tags  []string `json:"tags,omitempty"`
	Count int      `json:"count"`
	Score float64  `json:"score"`
}

// ResultEvent is a recall hit in <memory_results>.
type ResultEvent struct {
	TS      time.Time `json:"ts"`
	Kind    string    `json:"kind"`
	NodeID  string    `json:"node_id,omitempty"`
	Payload string    `json:"payload"`
}

// Apply carries out an update on branch: every write in one transaction
// (all or none), then the reads. It returns the <memory_results> block of
// the reads, or "" when there were none.
func (m *Memory) Apply(ctx context.Context, branch string, u *Update) (string, error) {
	start := time.Now()
	p := ApplyParams{Branch: branch, CoreDeletes: u.CoreDeletes}
	var in strings.Builder
	for _, c := range u.CoreSets {
		v := m.redact(c.Value)
		in.WriteString(c.Key + ": " + v + "\n")
		p.CoreSets = append(p.CoreSets, CoreSetParams{Branch: branch, Key: c.Key, Value: v, Importance: c.Importance, TTL: c.TTL})
	}
	for _, a := range u.Archival {
		t := m.redact(a.Text)
		in.WriteString(t + "\n")
		p.Archival = append(p.Archival, ArchivalWriteParams{Branch: branch, Text: t, Tags: a.Tags, Context: "memory_update"})
	}
	writes := len(p.CoreSets) + len(p.CoreDeletes) + len(p.Archival)
	if writes > 0 {
		err := m.store.Apply(ctx, p)
		m.record(branch, "memory_update_writes", start, in.String(), "", writes, err)
		if err != nil {
			return "", fmt.Errorf("memory: apply <memory_update> writes (none applied): %w", err)
		}
	}
	if !u.HasReads() {
		return "", nil
	}
	var r Results
	if len(u.CoreGets) > 0 {
		r.Core = map[string]*string{}
		for _, k := range u.CoreGets {
			e, ok, err := m.CoreGet(ctx, branch, k)
			if err != nil {
				return "", err
			}
			if ok {
				v := e.Value
				r.Core[k] = &v
			} else {
				r.Core[k] = nil
			}
		}
	}
	if s := u.ArchivalSearch; s != nil {
		hits, err := m.ArchivalSearch(ctx, ArchivalSearchParams{Branch: branch, Query: s.Query, Tags: s.Tags, K: s.K})
		if err != nil {
			return "", err
		}
		r.ArchivalSearch = []ResultItem{}
		for _, h := range hits {
			r.ArchivalSearch = append(r.ArchivalSearch, ResultItem{Text: h.Text, Tags: h.Tags, Count: h.Count, Score: h.Score})
		}
	}
	if s := u.RecallSearch; s != nil {
		hits, err := m.RecallSearch(ctx, RecallSearchParams{Branch: branch, Query: s.Query, Limit: s.K})
		if err != nil {
			return "", err
		}
		r.RecallSearch = []ResultEvent{}
		for _, h := range hits {
			r.RecallSearch = append(r.RecallSearch, ResultEvent{TS: h.TS, Kind: h.Kind, NodeID: h.NodeID, Payload: h.Payload})
		}
	}
	data, err := jsonw.MarshalIndent(r)
	if err != nil {
		return "", err
	}
	return resultsOpenTag + "\n" + string(data) + "\n" + resultsCloseTag, nil
}

// FollowUp sends the <memory_results> of a round back to the model and
// returns its next reply.
type FollowUp func(ctx context.Context, results string) (string, error)

// Converse handles a reply's <memory_update> block: it applies the writes
// and, while the block asks for reads, answers them through followUp, up
// to max_memory_read_rounds; it returns the payload of the last reply. A
// missing block when required is ErrMissingUpdate, for the caller to retry
// with feedback.
func (m *Memory) Converse(ctx context.Context, branch, reply string, required bool, followUp FollowUp) (string, error) {
	for round := 0; ; round++ {
		u, payload, err := ParseReply(reply, required)
		if err != nil || u == nil {
			return payload, err
		}
		results, err := m.Apply(ctx, branch, u)
		if err != nil {
			return payload, err
		}
		if results == "" {
			return payload, nil
		}
		if round >= m.cfg.MaxMemoryReadRounds {
			return payload, fmt.Errorf("%w: %d allowed", ErrReadRounds, m.cfg.MaxMemoryReadRounds)
		}
		if followUp == nil {
			return payload, nil
		}
		if reply, err = followUp(ctx, results); err != nil {
			return payload, err
		}
	}
}
