package web

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/hpcq/hpcq/internal/runview"
	"github.com/hpcq/hpcq/pkg/schema"
)

// The archive: runs a cluster's results store (ClickHouse) knows whose run
// directory is not served here. They are listed and shown from its tables
// (runs, nodes, phase_runs, metrics, llm_calls, artifacts): the tree, each
// node's phases, metrics and LLM calls; not what only the directory keeps
// (plans, code, logs, plots, memory).

// Sources of a RunSummary.
const (
	SourceDir     = "dir"        // a run directory
	SourceArchive = "clickhouse" // only the results store's tables
)

// maxArchivedRuns bounds the runs the list takes from the archive.
const maxArchivedRuns = 500

// archivedRuns lists the archive's runs but those in skip, newest first.
func (s *Server) archivedRuns(ctx context.Context, skip map[string]bool) ([]RunSummary, error) {
	runs, err := s.archiveSummaries(ctx, "")
	if err != nil {
		return nil, err
	}
	out := runs[:0]
	for _, r := range runs {
		if !skip[r.ID] {
			out = append(out, r)
		}
	}
	return out, nil
}

// archiveSummaries reads the summaries of the archive's runs, or of run id.
func (s *Server) archiveSummaries(ctx context.Context, id string) ([]RunSummary, error) {
	where := ""
	if id != "" {
		where = " WHERE run = " + quote(id)
	}
	tab, err := s.o.Archive(ctx, "SELECT run, status, title, mode, config, ts FROM runs FINAL"+where+
		fmt.Sprintf(" ORDER BY ts DESC LIMIT %d", maxArchivedRuns))
	if err != nil {
		return nil, err
	}
	var out []RunSummary
	byID := map[string]*RunSummary{}
	for _, row := range tab.Rows {
		r := RunSummary{ID: str(row[0]), Title: str(row[2]), Mode: str(row[3]), Started: toTime(row[5]), Source: SourceArchive, Command: "run"}
		r.Status = str(row[1]) // the runs row's words are the API's
		var spec struct {
			Metric struct{ Name, Direction, Unit string }
		}
		if json.Unmarshal([]byte(str(row[4])), &spec) == nil && spec.Metric.Name != "" {
			r.Metric, r.Unit, r.Direction = spec.Metric.Name, spec.Metric.Unit, spec.Metric.Direction
			if r.Direction == "" {
				r.Direction = "maximize"
			}
		} else {
			r.Command = "exec"
		}
		out = append(out, r)
	}
	for i := range out {
		byID[out[i].ID] = &out[i]
	}
	if len(out) == 0 {
		return out, nil
	}
	nodes, err := s.o.Archive(ctx, "SELECT run, count() AS nodes, countIf(status != 'queued') AS done, countIf(status NOT IN ('ok', 'cached', 'queued')) AS buggy, "+
		"argMax(node, metric_value) AS best_max, max(metric_value) AS vmax, argMin(node, metric_value) AS best_min, min(metric_value) AS vmin "+
		"FROM nodes FINAL"+where+" GROUP BY run")
	if err != nil {
		return nil, err
	}
	for _, row := range nodes.Rows {
		r := byID[str(row[0])]
		if r == nil {
			continue
		}
		r.Nodes, r.Done, r.Buggy = int(toFloat(row[1])), int(toFloat(row[2])), int(toFloat(row[3]))
		best, v := row[4], row[5]
		if r.Direction == "minimize" {
			best, v = row[6], row[7]
		}
		if f, ok := number(v); ok && r.Metric != "" {
			r.Best, r.BestValue = str(best), &f
		}
	}
	// The runs row keeps its last write (its end); its first LLM call (Phase
	// 0 of the first node) is the run's start.
	calls, err := s.o.Archive(ctx, "SELECT run, count(), sum(tokens_in), sum(tokens_out), sum(cost_usd), min(ts) FROM llm_calls FINAL"+where+" GROUP BY run")
	if err != nil {
		return nil, err
	}
	for _, row := range calls.Rows {
		if r := byID[str(row[0])]; r != nil {
			r.LLMCalls, r.TokensIn, r.TokensOut, r.CostUSD = int64(toFloat(row[1])), int64(toFloat(row[2])), int64(toFloat(row[3])), toFloat(row[4])
			if first := toTime(row[5]); !first.IsZero() && first.Before(r.Started) {
				r.Started = first
			}
		}
	}
	return out, nil
}

// archivedDetail is run id's page from the archive.
func (s *Server) archivedDetail(ctx context.Context, id string) (RunDetail, error) {
	sums, err := s.archiveSummaries(ctx, id)
	if err != nil {
		return RunDetail{}, err
	}
	if len(sums) == 0 {
		return RunDetail{}, fmt.Errorf("%w: %s", errNoRun, id)
	}
	det := RunDetail{RunSummary: sums[0], Cost: []CostPoint{}, Stages: schema.Stages, Results: map[string]string{"store": "clickhouse"}}
	if det.Best != "" {
		if views, err := s.archivedNodes(ctx, id); err == nil {
			lines := make([]runview.NodeLine, len(views))
			for i, v := range views {
				lines[i] = v.NodeLine
			}
			det.BestPath = bestPath(lines, det.Best)
		}
	}
	if det.Cost, err = s.costFrom(ctx, s.o.Archive, id); err != nil {
		det.CostError = err.Error()
	}
	return det, nil
}

// archivedNodes are run id's nodes from the nodes table (with the times of
// their phases).
func (s *Server) archivedNodes(ctx context.Context, id string) ([]NodeView, error) {
	tab, err := s.o.Archive(ctx, "SELECT node, parent, stage, kind, attempt, status, error_kind, metric_value FROM nodes FINAL WHERE run = "+quote(id)+" ORDER BY node")
	if err != nil {
		return nil, err
	}
	times, err := s.o.Archive(ctx, "SELECT node, min(ts), max(ts), sum(duration_ms), any(worker) FROM phase_runs FINAL WHERE run = "+quote(id)+" GROUP BY node")
	if err != nil {
		return nil, err
	}
	type span struct {
		start, end time.Time
		ms         float64
		worker     string
	}
	spans := map[string]span{}
	for _, row := range times.Rows {
		spans[str(row[0])] = span{toTime(row[1]), toTime(row[2]), toFloat(row[3]), str(row[4])}
	}
	out := make([]NodeView, 0, len(tab.Rows))
	for _, row := range tab.Rows {
		l := runview.NodeLine{Node: str(row[0]), Parent: str(row[1]), Stage: int(toFloat(row[2])), Kind: str(row[3]), Attempt: int(toFloat(row[4])),
			Status: str(row[5]), Reason: str(row[6])}
		if f, ok := number(row[7]); ok {
			l.Value, l.Metric = &f, fmt.Sprintf("%g", f)
		}
		v := NodeView{NodeLine: l}
		if sp, ok := spans[l.Node]; ok && !sp.start.IsZero() {
			ms := int64(sp.ms)
			v.Started, v.DurationMS, v.Worker = &sp.start, &ms, sp.worker
			end := sp.end
			v.Finished = &end
		}
		out = append(out, v)
	}
	return out, nil
}

// archivedNode is node's panel from the archive: its line, children,
// phases, metrics and LLM calls.
func (s *Server) archivedNode(ctx context.Context, id, node string, views []NodeView) (*NodeDetail, error) {
	n := &runview.Node{}
	found := false
	for _, v := range views {
		if v.Node == node {
			n.NodeLine, found = v.NodeLine, true
		}
		if v.Parent == node {
			n.Children = append(n.Children, v.Node)
		}
	}
	if !found {
		return nil, fmt.Errorf("%w: %s", runview.ErrNoNode, node)
	}
	where := " WHERE run = " + quote(id) + " AND node = " + quote(node)
	phases, err := s.o.Archive(ctx, "SELECT phase, status, exit_code, duration_ms, ts FROM phase_runs FINAL"+where+" AND attempt = "+fmt.Sprint(n.Attempt)+" ORDER BY ts")
	if err != nil {
		return nil, err
	}
	for _, row := range phases.Rows {
		n.Phases = append(n.Phases, runview.Phase{Name: str(row[0]), OK: str(row[1]) == "ok", ExitCode: int(toFloat(row[2])), DurationMS: int64(toFloat(row[3])), Started: toTime(row[4])})
	}
	metrics, err := s.o.Archive(ctx, "SELECT name, value, unit FROM metrics FINAL"+where+" AND attempt = "+fmt.Sprint(n.Attempt))
	if err != nil {
		return nil, err
	}
	for _, row := range metrics.Rows {
		if n.Metrics == nil {
			n.Metrics, n.MetricUnits = map[string]float64{}, map[string]string{}
		}
		n.Metrics[str(row[0])] = toFloat(row[1])
		if u := str(row[2]); u != "" {
			n.MetricUnits[str(row[0])] = u
		}
	}
	files, err := s.o.Archive(ctx, "SELECT kind, name, path, bytes FROM artifacts FINAL"+where+" AND attempt = "+fmt.Sprint(n.Attempt)+" ORDER BY kind, name")
	if err != nil {
		return nil, err
	}
	var kept []string
	for _, row := range files.Rows {
		kept = append(kept, str(row[2]))
	}
	sort.Strings(kept)
	n.ArtifactsNote = "this run's directory is not on this server: its plan, code, logs, plots and memory are in the run directory where its scheduler ran"
	if len(kept) > 0 {
		n.ArtifactsNote += " (" + strings.Join(kept, ", ") + ")"
	}
	det := &NodeDetail{Node: n, LLMCalls: []map[string]any{}}
	det.LLMCalls, det.CostUSD, err = s.llmCalls(ctx, s.o.Archive, id, node)
	if err != nil {
		det.LLMCallsError = err.Error()
	}
	return det, nil
}

func str(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case *string:
		if t != nil {
			return *t
		}
		return ""
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

// number is a numeric value of a query's answer (any width, signed or
// not, or a pointer to one: Nullable in ClickHouse); false for NULL.
func number(v any) (float64, bool) {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return 0, false
		}
		rv = rv.Elem()
	}
	switch rv.Kind() {
	case reflect.Float32, reflect.Float64:
		return rv.Float(), true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return float64(rv.Uint()), true
	case reflect.Bool:
		if rv.Bool() {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}
