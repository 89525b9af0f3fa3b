package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/web"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/memory/sqlite"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// Secrets of the fixture: one the server is told of, one only a pattern
// finds, one the token.
const (
	knownSecret   = "hpcq-known-secret-7f3a9c"
	patternSecret = "sk-proj-abcdefghijklmnopqrstuvwx"
	token         = "token-0123456789abcdef"
)

// fixture writes a run directory of two nodes by hand: n0001 finished
// (its code runs a command line holding both secrets, its log too), n0002
// published and not answered. It returns the directory.
func fixture(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "runs", "20260101-000000-abcdef")
	d := rundir.Dir(dir)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, d.WriteInfo(rundir.Info{RunID: d.ID(), Command: "exec", Mode: "local", NATSURL: "embedded", Tasks: 2,
		Results: map[string]string{"store": "sqlite"}, Started: time.Now().UTC()}))
	cmd := "curl -H 'Authorization: Bearer " + patternSecret + "' --token " + knownSecret + " https://example.org"
	for _, id := range []string{"n0001", "n0002"} {
		task := schema.NodeTask{V: 1, RunID: d.ID(), NodeID: id, Attempt: 1, Pool: "cpu", BranchID: id}
		task.Artifacts.Coding.Workspace.Files = []schema.File{{Path: "run.sh", Content: "#!/bin/sh\n" + cmd + "\necho '<script>alert(1)</script>'\n"}}
		task.Artifacts.Run.Commands = []string{"sh run.sh"}
		writeJSON(t, d.Path(rundir.NodeFile(id, rundir.TaskFile)), task)
	}
	res := schema.NodeResult{V: 1, RunID: d.ID(), NodeID: "n0001", Attempt: 1, Worker: "w1", Started: time.Now().UTC(), DurationMS: 1200,
		Phases:  []schema.PhaseResult{{Name: "run", OK: true, DurationMS: 1100, LogTail: cmd}},
		Metrics: map[string]float64{"score": 3}}
	writeJSON(t, d.Path(rundir.NodeFile("n0001", rundir.ResultFile)), map[string]any{"status": "ok", "result": res})
	logs := d.Path(rundir.NodeFile("n0001", "logs"))
	require.NoError(t, os.MkdirAll(logs, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(logs, "run.log"), []byte("$ "+cmd+"\nMETRIC score=3\n"), 0o644))
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(logs, "leak.log")))
	outputs := d.Path(rundir.NodeFile("n0001", "outputs"))
	require.NoError(t, os.MkdirAll(outputs, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(outputs, "plot.svg"), []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`), 0o644))
	// n0001's prompt log as runs write it; n0002's as runs before did.
	require.NoError(t, os.MkdirAll(d.Path(filepath.Join(rundir.OldPromptLogs, "n0002")), 0o755))
	require.NoError(t, os.WriteFile(d.Path(rundir.NodeFile("n0001", rundir.PromptsLog)), []byte("# 001 draft of n0001 (attempt 1)\n\n## user\n\n"+cmd+"\n"), 0o644))
	require.NoError(t, os.WriteFile(d.Path(rundir.NodeFile("n0001", rundir.PromptsJSONL)), []byte(`{"n":1}`+"\n"), 0o644))
	require.NoError(t, os.WriteFile(d.Path(filepath.Join(rundir.OldPromptLogs, "n0002", "001_draft.md")), []byte("# draft of n0002 (attempt 1)\n"), 0o644))
	writeJSON(t, d.Path(filepath.Join(rundir.OldPlansDir, "n0002", rundir.Phase0Plan)), map[string]string{"approach": "old-layout plan"})
	return dir
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

// memoryWithSecrets is a real SQLite memory store in which node n0001's
// branch holds both secrets in its core and recall.
func memoryWithSecrets(t *testing.T) memory.Store {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "memory.sqlite"), sqlite.Options{Run: "r"})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	_, err = st.Fork(ctx, memory.ForkParams{Branch: "n0001"})
	require.NoError(t, err)
	_, err = st.CoreSet(ctx, memory.CoreSetParams{Branch: "n0001", Key: "credentials", Value: "the key is " + patternSecret + " and " + knownSecret})
	require.NoError(t, err)
	_, err = st.RecallAppend(ctx, memory.RecallAppendParams{Branch: "n0001", Event: memory.RecallEvent{TS: time.Now(), Kind: "note", NodeID: "n0001",
		Payload: "export OPENAI_API_KEY=" + knownSecret}})
	require.NoError(t, err)
	return st
}

func newServer(t *testing.T, dir string, o web.Options) *httptest.Server {
	t.Helper()
	o.RunsDir = filepath.Dir(dir)
	o.Secrets = append(o.Secrets, knownSecret)
	o.Poll = 50 * time.Millisecond
	srv, err := web.New(o)
	require.NoError(t, err)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
}

func get(t *testing.T, ts *httptest.Server, path string, header ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, ts.URL+path, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body), resp.Header
}

func TestAPI(t *testing.T) {
	dir := fixture(t)
	id := rundir.Dir(dir).ID()
	store := memoryWithSecrets(t)
	ts := newServer(t, dir, web.Options{Memory: func(context.Context, string) (memory.Store, func(), error) { return store, func() {}, nil }})

	code, body, h := get(t, ts, "/api/runs")
	require.Equal(t, 200, code, body)
	require.Equal(t, "application/json", h.Get("Content-Type"))
	var runs struct{ Runs []web.RunSummary }
	require.NoError(t, json.Unmarshal([]byte(body), &runs))
	require.Len(t, runs.Runs, 1)
	r := runs.Runs[0]
	require.Equal(t, id, r.ID)
	require.Equal(t, 2, r.Nodes)
	require.Equal(t, 1, r.Done)
	require.Equal(t, schema.RunInterrupted, r.Status, "one of two tasks answered, nothing going")

	code, body, _ = get(t, ts, "/api/runs/"+id+"/nodes")
	require.Equal(t, 200, code, body)
	var nodes struct{ Nodes []web.NodeView }
	require.NoError(t, json.Unmarshal([]byte(body), &nodes))
	require.Len(t, nodes.Nodes, 2)
	require.Equal(t, "ok", nodes.Nodes[0].Status)
	require.NotNil(t, nodes.Nodes[0].Finished)
	require.Equal(t, "queued", nodes.Nodes[1].Status)

	code, body, _ = get(t, ts, "/api/runs/"+id+"/nodes/n0001")
	require.Equal(t, 200, code, body)
	var node map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &node))
	require.Equal(t, "n0001", node["node"])
	require.Contains(t, body, `echo '\u003cscript\u003ealert(1)\u003c/script\u003e'`, "code comes as text, escaped in JSON")
	logs := node["logs"].([]any)
	require.Len(t, logs, 1, "the link out of the run directory is not listed")
	require.Contains(t, logs[0].(map[string]any)["tail"], "METRIC score=3")
	require.Len(t, node["plots"].([]any), 1)
	mem := node["memory"].(map[string]any)
	require.Equal(t, "n0001", mem["branch"])
	require.Len(t, mem["core"].([]any), 1)
	require.Contains(t, body, "the key is [REDACTED] and [REDACTED]")
	require.Equal(t, "no results store to read the LLM calls from", node["llm_calls_error"])
	require.Equal(t, []any{map[string]any{"name": "prompts.md", "path": "nodes/n0001/prompts.md", "bytes": float64(fileSize(t, filepath.Join(dir, "nodes", "n0001", "prompts.md")))}},
		node["prompts"])
	code, body, _ = get(t, ts, "/api/runs/"+id+"/files/nodes/n0001/prompts.md")
	require.Equal(t, 200, code, body)
	require.Contains(t, body, "# 001 draft of n0001 (attempt 1)")
	require.NotContains(t, body, knownSecret)
	require.NotContains(t, body, patternSecret)
	code, body, _ = get(t, ts, "/api/runs/"+id+"/nodes/n0002")
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `"prompts":[{"bytes":29,"name":"001_draft.md","path":"prompt_logs/n0002/001_draft.md"}]`, "a run written before lists its prompt logs too")
	require.Contains(t, body, `"plan":{"approach":"old-layout plan"}`, "and its plan")
	code, body, _ = get(t, ts, "/api/runs/"+id+"/files/prompt_logs/n0002/001_draft.md")
	require.Equal(t, 200, code, body)
	require.Contains(t, body, "# draft of n0002")

	for path, want := range map[string]int{
		"/api/runs/nope":                                                      404,
		"/api/runs/" + id + "/nodes/n9999":                                    404,
		"/api/runs/" + id + "/nodes/..%2Frun.json":                            404,
		"/api/runs/" + id + "/files/run.json":                                 404,
		"/api/runs/" + id + "/files/nodes/n0001/task.json":                    404,
		"/api/runs/" + id + "/files/nodes/n0001/prompts.jsonl":                404,
		"/api/runs/" + id + "/files/nodes/n0001/logs/..%2F..%2F..%2Frun.json": 404,
		"/api/runs/" + id + "/files/nodes/n0001/logs/leak.log":                403,
		"/api/runs/..%2F..%2Fetc/nodes":                                       404,
		"/api/nothing":                                                        404,
	} {
		code, body, _ := get(t, ts, path)
		require.Equal(t, want, code, "%s: %s", path, body)
		require.NotContains(t, body, "root:", path)
	}

	code, body, h = get(t, ts, "/api/runs/"+id+"/files/nodes/n0001/logs/run.log")
	require.Equal(t, 200, code, body)
	require.Equal(t, "text/plain; charset=utf-8", h.Get("Content-Type"))
	require.Contains(t, body, "METRIC score=3")
	code, _, h = get(t, ts, "/api/runs/"+id+"/files/nodes/n0001/outputs/plot.svg")
	require.Equal(t, 200, code)
	require.Equal(t, "image/svg+xml", h.Get("Content-Type"))
	require.Contains(t, h.Get("Content-Security-Policy"), "sandbox", "a script in a plot never runs")

	code, body, h = get(t, ts, "/")
	require.Equal(t, 200, code)
	require.Contains(t, body, `<script src="/assets/app.js"`)
	require.Contains(t, h.Get("Content-Security-Policy"), "script-src 'self'")
	code, body, _ = get(t, ts, "/assets/app.js")
	require.Equal(t, 200, code)
	require.NotContains(t, body, "innerHTML", "the page never parses text as HTML")
}

// TestNoSecretInAnyAnswer: a key stored in memory and command lines that
// carry credentials reach no answer of the API, no file and no event.
func TestNoSecretInAnyAnswer(t *testing.T) {
	dir := fixture(t)
	id := rundir.Dir(dir).ID()
	store := memoryWithSecrets(t)
	ts := newServer(t, dir, web.Options{Memory: func(context.Context, string) (memory.Store, func(), error) { return store, func() {}, nil }})
	var all strings.Builder
	for _, p := range []string{"/api/runs", "/api/runs/" + id, "/api/runs/" + id + "/nodes", "/api/runs/" + id + "/nodes/n0001",
		"/api/runs/" + id + "/nodes/n0002", "/api/runs/" + id + "/files/nodes/n0001/logs/run.log", "/api/runs/" + id + "/cluster"} {
		code, body, _ := get(t, ts, p)
		require.Equal(t, 200, code, "%s: %s", p, body)
		all.WriteString(body)
	}
	ev := readEvents(t, ts.URL+"/api/runs/"+id+"/events", 3, nil)
	all.WriteString(strings.Join(ev, "\n"))
	require.NotContains(t, all.String(), knownSecret)
	require.NotContains(t, all.String(), patternSecret)
	require.Contains(t, all.String(), memory.Redacted, "the secrets were there, and redacted")
}

func TestToken(t *testing.T) {
	dir := fixture(t)
	ts := newServer(t, dir, web.Options{Token: token})
	code, body, h := get(t, ts, "/api/runs")
	require.Equal(t, 401, code, body)
	require.Contains(t, h.Get("WWW-Authenticate"), "Bearer")
	require.NotContains(t, body, "runs\":", "nothing answered without the token")
	code, _, _ = get(t, ts, "/api/runs", "Authorization", "Bearer wrong-token-0123456789")
	require.Equal(t, 401, code)
	code, body, _ = get(t, ts, "/api/runs", "Authorization", "Bearer "+token)
	require.Equal(t, 200, code, body)
	require.NotContains(t, body, token)

	code, _, _ = get(t, ts, "/?token=nope")
	require.Equal(t, 401, code)
	code, _, h = get(t, ts, "/?token="+token)
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, "/", h.Get("Location"), "the token leaves the address bar")
	cookie := h.Get("Set-Cookie")
	require.Contains(t, cookie, "HttpOnly")
	require.Contains(t, cookie, "SameSite=Strict")
	code, _, _ = get(t, ts, "/api/runs", "Cookie", strings.SplitN(cookie, ";", 2)[0])
	require.Equal(t, 200, code)
}

func TestLoopbackOnlyWithoutToken(t *testing.T) {
	dir := fixture(t)
	ts := newServer(t, dir, web.Options{})
	req, err := http.NewRequest(http.MethodGet, ts.URL+"/api/runs", nil)
	require.NoError(t, err)
	req.Host = "attacker.example:8780" // a DNS rebinding page
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode)

	_, err = web.Listen("0.0.0.0:0", "")
	require.ErrorContains(t, err, web.TokenEnv)
	_, err = web.Listen(":0", "")
	require.ErrorContains(t, err, "listens beyond this machine")
	_, err = web.Listen("0.0.0.0:0", "short")
	require.ErrorContains(t, err, "16 or more")
	l, err := web.Listen("127.0.0.1:0", "")
	require.NoError(t, err)
	l.Close()
}

// readEvents reads n events of a server-sent events stream; then, when
// after is set, calls it and reads until want is in an event.
func readEvents(t *testing.T, url string, n int, after func() string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var events []string
	var cur strings.Builder
	want := ""
	for sc.Scan() {
		line := sc.Text()
		if line != "" {
			cur.WriteString(line + "\n")
			continue
		}
		if cur.Len() == 0 || strings.HasPrefix(cur.String(), "retry:") {
			cur.Reset()
			continue
		}
		events = append(events, cur.String())
		if want != "" && strings.Contains(cur.String(), want) {
			return events
		}
		cur.Reset()
		if len(events) == n {
			if after == nil {
				return events
			}
			want = after()
		}
	}
	t.Fatalf("stream ended after %d events (want %q): %v", len(events), want, sc.Err())
	return nil
}

// TestEventsFollowTheRunDirectory: a node answered while someone watches
// comes as an event.
func TestEventsFollowTheRunDirectory(t *testing.T) {
	dir := fixture(t)
	id := rundir.Dir(dir).ID()
	ts := newServer(t, dir, web.Options{})
	events := readEvents(t, ts.URL+"/api/runs/"+id+"/events", 3, func() string {
		res := schema.NodeResult{V: 1, RunID: id, NodeID: "n0002", Attempt: 1, Worker: "w2", Started: time.Now().UTC(), DurationMS: 10}
		writeJSON(t, rundir.Dir(dir).Path(rundir.NodeFile("n0002", rundir.ResultFile)), map[string]any{"status": "failed", "result": res})
		return `"node":"n0002"`
	})
	require.Contains(t, events[0], "event: node\n")
	require.Contains(t, events[0], `"node":"n0001"`)
	require.Contains(t, events[1], `"node":"n0002","status":"queued"`)
	require.Contains(t, events[2], "event: run\n")
	last := events[len(events)-1]
	require.Contains(t, last, "event: node\n")
	require.Contains(t, last, `"status":"failed"`)
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}

// TestEventsOfAnEndedRun: an ended run (journal/end.json) is not read
// whole at every poll, yet what changes in it reaches the stream: at once
// when its tree journal grows (a resume records there first), and within
// the ended-run period when only a node's file changed.
func TestEventsOfAnEndedRun(t *testing.T) {
	for _, journal := range []bool{true, false} {
		dir := fixture(t)
		d := rundir.Dir(dir)
		id := d.ID()
		writeJSON(t, d.Path(rundir.JournalDir+"/end.json"), map[string]any{})
		require.NoError(t, os.WriteFile(d.Path(rundir.TreeJournal), nil, 0o644))
		ts := newServer(t, dir, web.Options{})
		events := readEvents(t, ts.URL+"/api/runs/"+id+"/events", 3, func() string {
			res := schema.NodeResult{V: 1, RunID: id, NodeID: "n0002", Attempt: 1, Worker: "w2", Started: time.Now().UTC(), DurationMS: 10}
			writeJSON(t, d.Path(rundir.NodeFile("n0002", rundir.ResultFile)), map[string]any{"status": "failed", "result": res})
			if journal {
				f, err := os.OpenFile(d.Path(rundir.TreeJournal), os.O_APPEND|os.O_WRONLY, 0)
				require.NoError(t, err)
				_, err = f.Write([]byte{0})
				require.NoError(t, err)
				require.NoError(t, f.Close())
			}
			return `"node":"n0002"`
		})
		require.Contains(t, events[len(events)-1], `"status":"failed"`, "journal grown: %v", journal)
	}
}
