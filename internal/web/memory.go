package web

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/hpcq/hpcq/internal/runview"
	"github.com/hpcq/hpcq/pkg/memory"
)

// MemoryView is the memory as a node's branch sees it: its core, its
// recall window and running summary, and the archival texts a search for
// the node's plan finds.
type MemoryView struct {
	Branch        string         `json:"branch"`
	Core          []CoreItem     `json:"core"`
	RecallSummary string         `json:"recall_summary,omitempty"`
	Recall        []RecallItem   `json:"recall"`
	RecallTotal   int            `json:"recall_total"`
	Archival      []ArchivalItem `json:"archival"`
	// ArchivalQuery is what the archival texts were searched with.
	ArchivalQuery string `json:"archival_query,omitempty"`
	Error         string `json:"error,omitempty"`
}

// CoreItem is one core entry visible to the branch.
type CoreItem struct {
	Key        string `json:"key"`
	Value      string `json:"value"`
	Importance int    `json:"importance"`
	Branch     string `json:"branch"`
}

// RecallItem is one recall event visible to the branch.
type RecallItem struct {
	Seq     int64     `json:"seq"`
	TS      time.Time `json:"ts"`
	Kind    string    `json:"kind"`
	Node    string    `json:"node,omitempty"`
	Phase   string    `json:"phase,omitempty"`
	Payload string    `json:"payload"`
}

// ArchivalItem is one archival text found for the node.
type ArchivalItem struct {
	Text  string   `json:"text"`
	Tags  []string `json:"tags,omitempty"`
	Count int      `json:"count"`
	Score float64  `json:"score"`
}

// Window and hits shown per node.
const (
	recallShown   = 20
	archivalShown = 5
)

// memoryView reads node n's branch; nil when the run has no memory or the
// node no branch.
func (s *Server) memoryView(ctx context.Context, dir string, n *runview.Node) *MemoryView {
	if s.o.Memory == nil || n.Branch == "" {
		return nil
	}
	v := &MemoryView{Branch: n.Branch, Core: []CoreItem{}, Recall: []RecallItem{}, Archival: []ArchivalItem{}}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, closeStore, err := s.o.Memory(ctx, dir)
	if err != nil {
		v.Error = err.Error()
		return v
	}
	if st == nil {
		return nil // the run's memory was off
	}
	defer closeStore()
	core, err := st.CoreList(ctx, memory.CoreListParams{Branch: n.Branch})
	if err != nil {
		v.Error = err.Error()
		return v
	}
	for _, c := range core {
		v.Core = append(v.Core, CoreItem{Key: c.Key, Value: c.Value, Importance: c.Importance, Branch: c.Branch})
	}
	sum, err := st.RecallSummaryGet(ctx, n.Branch)
	if err != nil {
		v.Error = err.Error()
		return v
	}
	v.RecallSummary = sum.Text
	evs, total, err := st.RecallList(ctx, memory.RecallListParams{Branch: n.Branch, Limit: recallShown, Newest: true, Total: true})
	if err != nil {
		v.Error = err.Error()
		return v
	}
	v.RecallTotal = total
	for _, e := range evs {
		v.Recall = append(v.Recall, RecallItem{Seq: e.Seq, TS: e.TS, Kind: e.Kind, Node: e.NodeID, Phase: e.Phase, Payload: e.Payload})
	}
	v.ArchivalQuery = archivalQuery(n)
	hits, err := st.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: n.Branch, Query: v.ArchivalQuery, K: archivalShown})
	if err != nil {
		v.Error = err.Error()
		return v
	}
	for _, h := range hits {
		v.Archival = append(v.Archival, ArchivalItem{Text: h.Text, Tags: h.Tags, Count: h.Count, Score: h.Score})
	}
	return v
}

// archivalQuery is the node's plan's goal and approach, or its kind.
func archivalQuery(n *runview.Node) string {
	var plan struct {
		Goal     string `json:"goal"`
		Approach string `json:"approach"`
	}
	if len(n.Plan) > 0 && json.Unmarshal(n.Plan, &plan) == nil {
		if q := strings.TrimSpace(plan.Goal + " " + plan.Approach); q != "" {
			return q
		}
	}
	return n.Kind
}
