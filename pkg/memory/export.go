package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hpcq/hpcq/internal/fileio"
	"github.com/hpcq/hpcq/internal/textcut"
)

// Export file names, as the seed names them.
const (
	ExportMarkdown   = "final_memory_for_paper.md"
	ExportJSON       = "final_memory_for_paper.json"
	ResourceSnapshot = "resource_snapshot.json"
	// ExportDelta is the best path's memory, each branch as its difference
	// from its parent (EncodeDelta): the core keys and recall events each
	// branch saw, lossless, in a fraction of the tokens of the JSON.
	ExportDelta = "final_memory_path.0d"
)

// ExportParams name the run's root branch, the best branch, and where the
// files go.
type ExportParams struct {
	Root string
	Best string
	Dir  string
	// Markdown and JSON name the files (default ExportMarkdown and
	// ExportJSON: the seed's final_memory_filename_md and _json).
	Markdown, JSON string
}

// ExportEvent is a recall event in the export.
type ExportEvent struct {
	Seq     int64     `json:"seq"`
	TS      time.Time `json:"ts"`
	Branch  string    `json:"branch"`
	Kind    string    `json:"kind"`
	NodeID  string    `json:"node_id,omitempty"`
	Phase   string    `json:"phase,omitempty"`
	Payload string    `json:"payload"`
}

// ExportError is an error met on the best branch's path and the event
// that came after it in the same phase without failing, if any.
type ExportError struct {
	Error   ExportEvent  `json:"error"`
	FixedBy *ExportEvent `json:"fixed_by"`
}

// Exported is the content of final_memory_for_paper.json.
type Exported struct {
	Root          string            `json:"root"`
	Best          string            `json:"best"`
	Generated     time.Time         `json:"generated"`
	IdeaSummary   string            `json:"idea_summary"`
	Phase0Summary string            `json:"phase0_summary"`
	Path          []string          `json:"path"`
	Core          map[string]string `json:"core"`
	RecallSummary string            `json:"recall_summary,omitempty"`
	Decisions     []ExportEvent     `json:"decisions"`
	Results       []ExportEvent     `json:"results"`
	Errors        []ExportError     `json:"errors"`
}

func isFailure(kind string) bool {
	return kind == EventErrorEncountered || strings.HasSuffix(kind, "_failed")
}

func isResult(kind string) bool {
	switch kind {
	case EventNodeResult, EventMetricExtracted, EventExecutionResult, eventRunComplete:
		return true
	}
	return false
}

// Export writes final_memory_for_paper.md and .json for the best branch
// (its path from the root, the decisions and results along it, the errors
// met and what followed them) and resource_snapshot.json (the
// RESOURCE_INDEX core entry, or an empty object).
func (m *Memory) Export(ctx context.Context, p ExportParams) (Exported, error) {
	start := time.Now()
	e, err := m.export(ctx, p)
	m.record(p.Best, "export", start, "", "", len(e.Decisions), err)
	return e, err
}

// export builds the export of the branches from p.Root to p.Best.
//
// Long: the export document written top to bottom, one block per section
// of the seed's final_memory_for_paper.
func (m *Memory) export(ctx context.Context, p ExportParams) (Exported, error) {
	out := Exported{Root: p.Root, Best: p.Best, Generated: m.opts.Now().UTC(), Core: map[string]string{},
		Decisions: []ExportEvent{}, Results: []ExportEvent{}, Errors: []ExportError{}}
	// The path from the root to the best branch.
	for cur := p.Best; cur != ""; {
		b, err := m.store.BranchGet(ctx, cur)
		if err != nil {
			return out, err
		}
		out.Path = append([]string{cur}, out.Path...)
		if cur == p.Root {
			break
		}
		cur = b.Parent
	}
	if len(out.Path) == 0 || out.Path[0] != p.Root {
		return out, fmt.Errorf("%w: export: %q does not descend from %q", ErrInvalid, p.Best, p.Root)
	}
	core, err := m.store.CoreList(ctx, CoreListParams{Branch: p.Best})
	if err != nil {
		return out, err
	}
	var resources string
	for _, c := range core {
		out.Core[c.Key] = c.Value
		switch c.Key {
		case "IDEA_SUMMARY":
			out.IdeaSummary = c.Value
		case "PHASE0_SUMMARY":
			out.Phase0Summary = c.Value
		case "RESOURCE_INDEX":
			resources = c.Value
		}
	}
	sum, err := m.store.RecallSummaryGet(ctx, p.Best)
	if err != nil {
		return out, err
	}
	out.RecallSummary = sum.Text
	evs, _, err := m.store.RecallList(ctx, RecallListParams{Branch: p.Best})
	if err != nil {
		return out, err
	}
	for i, ev := range evs {
		x := ExportEvent{Seq: ev.Seq, TS: ev.TS, Branch: ev.Branch, Kind: ev.Kind, NodeID: ev.NodeID, Phase: ev.Phase, Payload: ev.Payload}
		out.Decisions = append(out.Decisions, x)
		if isResult(ev.Kind) {
			out.Results = append(out.Results, x)
		}
		if isFailure(ev.Kind) {
			fe := ExportError{Error: x}
			for _, next := range evs[i+1:] {
				if !isFailure(next.Kind) && (ev.Phase == "" || next.Phase == ev.Phase) {
					y := ExportEvent{Seq: next.Seq, TS: next.TS, Branch: next.Branch, Kind: next.Kind, NodeID: next.NodeID, Phase: next.Phase, Payload: next.Payload}
					fe.FixedBy = &y
					break
				}
			}
			out.Errors = append(out.Errors, fe)
		}
	}
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		return out, err
	}
	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return out, err
	}
	if p.Markdown == "" {
		p.Markdown = ExportMarkdown
	}
	if p.JSON == "" {
		p.JSON = ExportJSON
	}
	if err := fileio.WriteFileAtomic(filepath.Join(p.Dir, p.JSON), append(data, '\n')); err != nil {
		return out, err
	}
	if err := fileio.WriteFileAtomic(filepath.Join(p.Dir, p.Markdown), []byte(exportMarkdown(out))); err != nil {
		return out, err
	}
	tree, err := m.pathTree(ctx, out.Path)
	if err != nil {
		return out, err
	}
	delta, err := EncodeDelta(tree)
	if err != nil {
		return out, err
	}
	if err := fileio.WriteFileAtomic(filepath.Join(p.Dir, ExportDelta), []byte(delta)); err != nil {
		return out, err
	}
	snap := []byte("{}\n")
	if resources != "" {
		if json.Valid([]byte(resources)) {
			snap = []byte(resources + "\n")
		} else {
			snap, _ = json.Marshal(map[string]string{"resource_index": resources})
		}
	}
	return out, fileio.WriteFileAtomic(filepath.Join(p.Dir, ResourceSnapshot), snap)
}

// pathTree is the state of each branch of path (root first): its visible
// core keys and recall events.
func (m *Memory) pathTree(ctx context.Context, path []string) (Tree, error) {
	var t Tree
	for i, id := range path {
		br := BranchState{ID: id}
		if i > 0 {
			br.Parent = path[i-1]
		}
		core, err := m.store.CoreList(ctx, CoreListParams{Branch: id})
		if err != nil {
			return t, err
		}
		for _, c := range core {
			br.State.Core = append(br.State.Core, StateCore{Key: c.Key, Value: c.Value, Importance: c.Importance})
		}
		slices.SortFunc(br.State.Core, func(a, b StateCore) int { return strings.Compare(a.Key, b.Key) })
		evs, _, err := m.store.RecallList(ctx, RecallListParams{Branch: id})
		if err != nil {
			return t, err
		}
		for _, e := range evs {
			br.State.Recall = append(br.State.Recall, StateEvent{Kind: e.Kind, Phase: e.Phase, Node: e.NodeID, Payload: e.Payload})
		}
		t.Branches = append(t.Branches, br)
	}
	return t, nil
}

func exportMarkdown(e Exported) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Final memory: branch %s\n\n", e.Best)
	fmt.Fprintf(&b, "Path from the root: %s\n\n", strings.Join(e.Path, " -> "))
	section := func(title, body string) {
		if strings.TrimSpace(body) == "" {
			body = "(none)"
		}
		fmt.Fprintf(&b, "## %s\n\n%s\n\n", title, body)
	}
	section("Idea", e.IdeaSummary)
	section("Plan (Phase 0)", e.Phase0Summary)
	section("Summary of earlier events", e.RecallSummary)
	line := func(x ExportEvent) string {
		s := fmt.Sprintf("- %s `%s`", x.TS.Format("2006-01-02 15:04:05"), x.Kind)
		if x.NodeID != "" {
			s += " node " + x.NodeID
		}
		return s + ": " + textcut.OneLine(x.Payload, 400)
	}
	var res []string
	for _, x := range e.Results {
		res = append(res, line(x))
	}
	section("Results", strings.Join(res, "\n"))
	var errs []string
	for _, x := range e.Errors {
		s := line(x.Error)
		if x.FixedBy != nil {
			s += "\n  - then: " + strings.TrimPrefix(line(*x.FixedBy), "- ")
		} else {
			s += "\n  - not resolved on this path"
		}
		errs = append(errs, s)
	}
	section("Errors met and what followed", strings.Join(errs, "\n"))
	var dec []string
	for _, x := range e.Decisions {
		dec = append(dec, line(x))
	}
	section("Decisions along the path", strings.Join(dec, "\n"))
	var core []string
	for _, k := range sortedKeys(e.Core) {
		core = append(core, fmt.Sprintf("- %s: %s", k, textcut.OneLine(e.Core[k], 400)))
	}
	section("Core memory", strings.Join(core, "\n"))
	return b.String()
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
