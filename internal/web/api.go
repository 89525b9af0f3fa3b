package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hpcq/hpcq/internal/runview"
	"github.com/hpcq/hpcq/internal/version"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// RunSummary is a run as the runs list shows it.
type RunSummary struct {
	ID      string    `json:"id"`
	Title   string    `json:"title,omitempty"`
	Command string    `json:"command"` // run or exec
	Mode    string    `json:"mode"`    // local or cluster
	Status  string    `json:"status"`
	Started time.Time `json:"started"`
	Resumes int       `json:"resumes"`
	// Nodes counts the nodes started; Done those with an outcome, Buggy
	// those of them that failed.
	Nodes int `json:"nodes"`
	Done  int `json:"done"`
	Buggy int `json:"buggy"`
	// Metric is what the search optimizes (maximize or minimize).
	Metric    string   `json:"metric,omitempty"`
	Unit      string   `json:"unit,omitempty"`
	Direction string   `json:"direction,omitempty"`
	Best      string   `json:"best,omitempty"`
	BestValue *float64 `json:"best_value,omitempty"`
	LLMCalls  int64    `json:"llm_calls"`
	TokensIn  int64    `json:"tokens_in"`
	TokensOut int64    `json:"tokens_out"`
	// TokensReasoning of TokensOut were spent reasoning; TokensCached of
	// TokensIn came from the endpoint's prompt cache.
	TokensReasoning int64   `json:"tokens_reasoning"`
	TokensCached    int64   `json:"tokens_cached"`
	CostUSD         float64 `json:"cost_usd"`
	// LLMCaveats says what the usage's numbers leave out or estimate
	// (llm.Usage.Caveats: estimated tokens, unpriced calls, replies
	// without an answer).
	LLMCaveats string `json:"llm_caveats,omitempty"`
	StoppedBy  string `json:"stopped_by,omitempty"`
	Canceled   string `json:"canceled,omitempty"`
	// Source is "dir" (a run directory) or "clickhouse" (only the results
	// store's tables know the run: no plans, code, logs or memory).
	Source string `json:"source"`
	// Error says what of the run directory could not be read.
	Error string `json:"error,omitempty"`
}

// RunDetail is one run: its summary, how it was started, and its series.
type RunDetail struct {
	RunSummary
	Idea       string            `json:"idea,omitempty"`
	Results    map[string]string `json:"results,omitempty"`
	Memory     map[string]string `json:"memory,omitempty"`
	LLM        map[string]string `json:"llm,omitempty"`
	NATS       string            `json:"nats_url,omitempty"`
	Version    string            `json:"version,omitempty"`
	Workers    int               `json:"local_workers"`
	Slots      int               `json:"slots"`
	StageNotes map[string]string `json:"stage_notes,omitempty"`
	// Stages names the stages a node's stage number stands for (1 to 4),
	// as run.yaml does.
	Stages []string `json:"stages"`
	// BestPath are the nodes from the root to the best node.
	BestPath []string `json:"best_path,omitempty"`
	// Cost is the cost over time: cumulative, one point per LLM call (at
	// most 500, evenly thinned).
	Cost      []CostPoint `json:"cost"`
	CostError string      `json:"cost_error,omitempty"`
	// Paper is the run's paper, when one was written.
	Paper *PaperView `json:"paper,omitempty"`
}

// CostPoint is the run's cumulative LLM cost at a time.
type CostPoint struct {
	TS      time.Time `json:"ts"`
	Calls   int       `json:"calls"`
	CostUSD float64   `json:"cost_usd"`
}

// NodeView is a node in a list: runview's line, with the time it finished.
type NodeView struct {
	runview.NodeLine
	Finished *time.Time `json:"finished,omitempty"`
}

// NodeDetail is one node: runview's Node, its memory and its LLM calls.
type NodeDetail struct {
	*runview.Node
	Memory        *MemoryView      `json:"memory,omitempty"`
	LLMCalls      []map[string]any `json:"llm_calls"`
	LLMCallsError string           `json:"llm_calls_error,omitempty"`
	CostUSD       float64          `json:"cost_usd"`
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.index)
	mux.Handle("GET /assets/", assetHandler())
	if s.o.Metrics != nil {
		mux.Handle("GET /metrics", s.o.Metrics)
	}
	mux.HandleFunc("GET /api/version", func(w http.ResponseWriter, r *http.Request) {
		s.writeJSON(w, map[string]string{"version": version.Version})
	})
	mux.HandleFunc("GET /api/runs", s.listRuns)
	mux.HandleFunc("GET /api/runs/{run}", s.getRun)
	mux.HandleFunc("GET /api/runs/{run}/nodes", s.listNodes)
	mux.HandleFunc("GET /api/runs/{run}/nodes/{node}", s.getNode)
	mux.HandleFunc("GET /api/runs/{run}/events", s.events)
	mux.HandleFunc("GET /api/runs/{run}/cluster", s.getCluster)
	mux.HandleFunc("GET /api/runs/{run}/files/{path...}", s.getFile)
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, http.StatusNotFound, errors.New("no such API path (GET only): see docs/api.md"))
	})
	return s.authenticate(secure(mux))
}

// secure sets the headers every answer carries: no framing, no sniffing,
// no referrer, and a content security policy allowing the dashboard's own
// scripts, styles and images only.
func secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

func (s *Server) writeJSON(w http.ResponseWriter, v any) {
	data, err := s.redact.json(v)
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(data, '\n'))
}

// fail answers {"error": ...}; a 5xx is logged.
func (s *Server) fail(w http.ResponseWriter, code int, err error) {
	if code >= 500 {
		s.log.Warn("dashboard request failed", "err", err)
	}
	data, _ := json.Marshal(map[string]string{"error": s.redact.text(err.Error())})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(data, '\n'))
}

// failRun answers an error of finding or reading a run.
func (s *Server) failRun(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, errNoRun), errors.Is(err, runview.ErrNoNode):
		s.fail(w, http.StatusNotFound, err)
	default:
		s.fail(w, http.StatusInternalServerError, err)
	}
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	dirs, err := s.runDirs()
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	out := make([]RunSummary, 0, len(dirs))
	seen := map[string]bool{}
	for _, d := range dirs {
		out = append(out, s.summary(d))
		seen[rundir.Dir(d).ID()] = true
	}
	answer := map[string]any{"runs": out}
	if s.o.Archive != nil {
		archived, err := s.archivedRuns(r.Context(), seen)
		if err != nil {
			answer["archive_error"] = err.Error()
		}
		answer["runs"] = append(out, archived...)
	}
	s.writeJSON(w, answer)
}

// summary reads a run's summary; what cannot be read is in its Error.
func (s *Server) summary(dir string) RunSummary {
	d := rundir.Dir(dir)
	sum := RunSummary{ID: d.ID(), Status: schema.RunInterrupted, Source: SourceDir}
	info, err := d.ReadInfo()
	if err != nil {
		sum.Error = err.Error()
		return sum
	}
	sum.Command, sum.Mode, sum.Started, sum.Resumes = info.Command, info.Mode, info.Started, info.Resumes
	if info.Command == "run" {
		snap, err := runview.ReadSnapshot(dir)
		if err != nil {
			sum.Error = err.Error()
		}
		sum.Title, sum.Metric, sum.Unit = snap.Title, snap.Metric, snap.Unit
		sum.Nodes, sum.Done, sum.Buggy, sum.Best, sum.BestValue = snap.Nodes, snap.Done, snap.Buggy, snap.Best, snap.Value
		sum.LLMCalls, sum.TokensIn, sum.TokensOut, sum.CostUSD = snap.Usage.Calls, snap.Usage.TokensIn, snap.Usage.TokensOut, snap.Usage.CostUSD
		sum.TokensReasoning, sum.TokensCached, sum.LLMCaveats = snap.Usage.TokensReasoning, snap.Usage.TokensCached, snap.Usage.Caveats()
		sum.StoppedBy = snap.Stopped
		if spec, err := runview.ReadSpec(dir); err == nil {
			sum.Direction = spec.Metric.Direction
			if sum.Direction == "" {
				sum.Direction = "maximize"
			}
		}
	}
	end, ended, err := rundir.Dir(dir).ReadEnd()
	if err != nil && sum.Error == "" {
		sum.Error = err.Error()
	}
	switch {
	case sum.ID == s.o.Live && s.o.Live != "":
		sum.Status = schema.RunRunning
	case ended && end.Canceled != "":
		sum.Status, sum.Canceled = schema.RunCanceled, end.Canceled
	case ended && end.Status != "":
		sum.Status = end.Status
	case ended: // an end.json of a run before it recorded its status
		sum.Status = schema.RunDone
		if sum.StoppedBy != "" {
			sum.Status = schema.RunStopped
		} else if sum.Best == "" {
			sum.Status = schema.RunFailed
		}
	case alive(d):
		sum.Status = schema.RunRunning
	}
	if info.Command != "run" {
		lines, err := runview.ListNodes(dir)
		if err != nil && sum.Error == "" {
			sum.Error = err.Error()
		}
		sum.Title = fmt.Sprintf("%d tasks", info.Tasks)
		sum.Nodes = len(lines)
		for _, l := range lines {
			if !schema.Unfinished(l.Status) {
				sum.Done++
				if l.Status != schema.NodeOK && l.Status != schema.NodeCached {
					sum.Buggy++
				}
			}
		}
		if sum.Status == schema.RunInterrupted && sum.Done == info.Tasks && info.Tasks > 0 {
			sum.Status = schema.RunDone
			if sum.Buggy > 0 {
				sum.Status = schema.RunFailed
			}
		}
	}
	return sum
}

// alive says whether a local run's scheduler is going: its server.json
// names a process that exists.
func alive(d rundir.Dir) bool {
	srv, err := d.ReadServer()
	if err != nil || srv.PID <= 0 {
		return false
	}
	_, err = os.Stat("/proc/" + strconv.Itoa(srv.PID))
	return err == nil
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	ref, err := s.find(r.Context(), r.PathValue("run"))
	if err != nil {
		s.failRun(w, err)
		return
	}
	if ref.archived() {
		det, err := s.archivedDetail(r.Context(), ref.id)
		if err != nil {
			s.failRun(w, err)
			return
		}
		s.writeJSON(w, det)
		return
	}
	dir := ref.dir
	det := RunDetail{RunSummary: s.summary(dir), Cost: []CostPoint{}, Stages: schema.Stages}
	if info, err := rundir.Dir(dir).ReadInfo(); err == nil {
		det.Results, det.Memory, det.LLM, det.NATS, det.Version = info.Results, info.Memory, info.LLM, info.NATSURL, info.Version
		det.Workers, det.Slots = info.LocalWorkers, info.Slots
	}
	if spec, err := runview.ReadSpec(dir); err == nil {
		det.Idea = spec.Idea
	}
	if end, ok, _ := rundir.Dir(dir).ReadEnd(); ok && len(end.Notes) > 0 {
		det.StageNotes = map[string]string{}
		for k, v := range end.Notes {
			det.StageNotes[strconv.Itoa(k)] = v
		}
	}
	if det.Best != "" {
		if lines, err := runview.ListNodes(dir); err == nil {
			det.BestPath = bestPath(lines, det.Best)
		}
	}
	det.Paper = paperOf(dir)
	det.Cost, err = s.costFrom(r.Context(), s.queryOf(dir), det.ID)
	if err != nil {
		det.CostError = err.Error()
	}
	s.writeJSON(w, det)
}

// bestPath is the path from the root to best.
func bestPath(lines []runview.NodeLine, best string) []string {
	parent := map[string]string{}
	for _, l := range lines {
		parent[l.Node] = l.Parent
	}
	var path []string
	for id := best; id != "" && len(path) <= len(lines); id = parent[id] {
		path = append([]string{id}, path...)
	}
	return path
}

const maxCostPoints = 500

// query runs one read statement on a run's results.
type query func(ctx context.Context, sql string) (*results.Table, error)

// queryOf queries the results of the run in dir; nil without Options.Query.
func (s *Server) queryOf(dir string) query {
	if s.o.Query == nil {
		return nil
	}
	return func(ctx context.Context, sql string) (*results.Table, error) { return s.o.Query(ctx, dir, sql) }
}

var errNoResults = errors.New("no results store to read the LLM calls from")

// costFrom reads the run's LLM calls: the cumulative cost over time.
func (s *Server) costFrom(ctx context.Context, q query, run string) ([]CostPoint, error) {
	if q == nil {
		return []CostPoint{}, errNoResults
	}
	tab, err := q(ctx, "SELECT ts, cost_usd FROM llm_calls WHERE run = "+quote(run)+" ORDER BY ts_ms, call_id")
	if err != nil {
		return []CostPoint{}, err
	}
	all := make([]CostPoint, 0, len(tab.Rows))
	total := 0.0
	for i, row := range tab.Rows {
		total += toFloat(row[1])
		all = append(all, CostPoint{TS: toTime(row[0]), Calls: i + 1, CostUSD: total})
	}
	if len(all) <= maxCostPoints {
		return all, nil
	}
	out := make([]CostPoint, 0, maxCostPoints)
	for i := range maxCostPoints {
		out = append(out, all[(i+1)*len(all)/maxCostPoints-1])
	}
	return out, nil
}

// llmCalls reads node's LLM calls and their total cost.
func (s *Server) llmCalls(ctx context.Context, q query, run, node string) ([]map[string]any, float64, error) {
	calls := []map[string]any{}
	if q == nil {
		return calls, 0, errNoResults
	}
	tab, err := q(ctx, "SELECT ts, purpose, model, tokens_in, cached_tokens, tokens_out, reasoning_tokens, tokens_estimated, latency_ms, cost_usd, cache_hit, error, "+
		"finish_reason, unpriced "+
		"FROM llm_calls WHERE run = "+
		quote(run)+" AND node = "+quote(node)+" ORDER BY ts_ms, call_id")
	if err != nil {
		return calls, 0, err
	}
	total := 0.0
	for _, row := range tab.Rows {
		m := map[string]any{}
		for i, c := range tab.Columns {
			m[c] = row[i]
		}
		total += toFloat(m["cost_usd"])
		calls = append(calls, m)
	}
	return calls, total, nil
}

// quote is a SQL string literal of an id (CheckID'd: letters, digits, '-',
// '_', '.').
func quote(id string) string { return "'" + strings.ReplaceAll(id, "'", "''") + "'" }

func toFloat(v any) float64 {
	if t, ok := v.(string); ok {
		f, _ := strconv.ParseFloat(t, 64)
		return f
	}
	f, _ := number(v)
	return f
}

func toTime(v any) time.Time {
	switch t := v.(type) {
	case time.Time:
		return t.UTC()
	case string:
		for _, layout := range []string{"2006-01-02 15:04:05.999999999", time.RFC3339Nano} {
			if ts, err := time.Parse(layout, t); err == nil {
				return ts
			}
		}
	}
	return time.Time{}
}

func (s *Server) listNodes(w http.ResponseWriter, r *http.Request) {
	if _, views, ok := s.runNodes(w, r); ok {
		s.writeJSON(w, map[string]any{"nodes": views})
	}
}

// runNodes finds the request's run and reads its nodes; it answers the
// error itself (ok false).
func (s *Server) runNodes(w http.ResponseWriter, r *http.Request) (ref runRef, views []NodeView, ok bool) {
	ref, err := s.find(r.Context(), r.PathValue("run"))
	if err == nil {
		views, err = s.views(r.Context(), ref)
	}
	if err != nil {
		s.failRun(w, err)
		return ref, nil, false
	}
	return ref, views, true
}

// views lists a run's nodes, from its directory or the archive.
func (s *Server) views(ctx context.Context, ref runRef) ([]NodeView, error) {
	if ref.archived() {
		return s.archivedNodes(ctx, ref.id)
	}
	return s.nodeViews(ctx, ref.dir)
}

// nodeViews lists a run's nodes, with the running ones from the worker
// registry when the cluster can be read.
func (s *Server) nodeViews(ctx context.Context, dir string) ([]NodeView, error) {
	lines, err := runview.ListNodes(dir)
	if err != nil {
		return nil, err
	}
	if s.o.Cluster != nil && anyQueued(lines) {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		c, err := s.o.Cluster(cctx, dir)
		cancel()
		if err == nil && c != nil {
			runview.FillRunning(lines, rundir.Dir(dir).ID(), c.Workers)
		}
	}
	out := make([]NodeView, len(lines))
	for i, l := range lines {
		out[i] = NodeView{NodeLine: l}
		if l.Started != nil && l.DurationMS != nil && l.Status != schema.NodeRunning {
			f := l.Started.Add(time.Duration(*l.DurationMS) * time.Millisecond)
			out[i].Finished = &f
		}
	}
	return out, nil
}

func anyQueued(lines []runview.NodeLine) bool {
	for _, l := range lines {
		if l.Status == schema.NodeQueued {
			return true
		}
	}
	return false
}

func (s *Server) getNode(w http.ResponseWriter, r *http.Request) {
	ref, views, ok := s.runNodes(w, r)
	if !ok {
		return
	}
	if ref.archived() {
		det, err := s.archivedNode(r.Context(), ref.id, r.PathValue("node"), views)
		if err != nil {
			s.failRun(w, err)
			return
		}
		s.writeJSON(w, det)
		return
	}
	dir := ref.dir
	lines := make([]runview.NodeLine, len(views))
	for i, v := range views {
		lines[i] = v.NodeLine
	}
	n, err := runview.ReadNode(dir, r.PathValue("node"), lines)
	if err != nil {
		s.failRun(w, err)
		return
	}
	det := NodeDetail{Node: n, LLMCalls: []map[string]any{}}
	det.Memory = s.memoryView(r.Context(), dir, n)
	var err2 error
	if det.LLMCalls, det.CostUSD, err2 = s.llmCalls(r.Context(), s.queryOf(dir), ref.id, n.NodeLine.Node); err2 != nil {
		det.LLMCallsError = err2.Error()
	}
	s.writeJSON(w, det)
}

func (s *Server) getCluster(w http.ResponseWriter, r *http.Request) {
	ref, err := s.find(r.Context(), r.PathValue("run"))
	if err != nil {
		s.failRun(w, err)
		return
	}
	dir := ref.dir // "" for an archived run: the configured server
	if s.o.Cluster == nil {
		s.writeJSON(w, Cluster{Error: "this server does not read the queue (serve a run with its servers configured)"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	c, err := s.o.Cluster(ctx, dir)
	if err != nil {
		s.writeJSON(w, Cluster{Error: err.Error()})
		return
	}
	s.writeJSON(w, c)
}

// maxServedFile bounds a file served whole (a log is capped at 16 MiB on
// the worker; an output may be larger).
const maxServedFile = 64 << 20
