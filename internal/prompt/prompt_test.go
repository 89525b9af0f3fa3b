package prompt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/memory/sqlite"
	"github.com/hpcq/hpcq/pkg/schema"
)

const good = `{"phase_artifacts": {
  "download": {"commands": [], "notes": "nothing to fetch"},
  "coding": {"workspace": {"root": ".", "tree": ["stencil.c"], "files": [{"path": "src/stencil.c", "content": "int main(){return 0;}"}]}},
  "compile": {"build_plan": "one file", "commands": ["gcc -O3 -fopenmp -o stencil src/stencil.c"]},
  "run": {"commands": ["./stencil"], "expected_outputs": [], "metric_patterns": [{"name": "gflops", "regex": "GFLOPS: ([0-9.]+)"}]},
  "extra_section": {}
}, "constraints": {"max_threads": 8}}`

func TestParseArtifacts(t *testing.T) {
	t.Parallel()
	a, err := ParseArtifacts(good)
	require.NoError(t, err)
	require.Equal(t, "src/stencil.c", a.Phases.Coding.Workspace.Files[0].Path)
	require.Equal(t, []string{"gcc -O3 -fopenmp -o stencil src/stencil.c"}, a.Phases.Compile.Commands)
	require.Equal(t, "gflops", a.Phases.Run.MetricPatterns[0].Name)
	require.JSONEq(t, `{"max_threads": 8}`, string(a.Constraints))
	require.Equal(t, []string{"build plan: \"one file\"", "download: nothing to fetch"}, sortStrings(a.Notes))
	require.Equal(t, []string{"extra_section"}, a.Ignored)

	fenced, err := ParseArtifacts("```json\n" + good + "\n```")
	require.NoError(t, err)
	require.Equal(t, a.Phases, fenced.Phases)
}

func sortStrings(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestParseArtifactsRejects: hostile and broken replies get an error that
// names the problem; nothing is half-accepted.
func TestParseArtifactsRejects(t *testing.T) {
	t.Parallel()
	withFile := func(path string) string {
		return fmt.Sprintf(`{"phase_artifacts": {"coding": {"workspace": {"files": [{"path": %q, "content": "x"}]}}, "run": {"commands": ["true"]}}}`, path)
	}
	for name, tc := range map[string]struct{ payload, want string }{
		"empty":         {"", "no JSON payload"},
		"prose":         {"Sure! Here is the code.", "must be one JSON object"},
		"truncated":     {good[:len(good)/2], "invalid JSON"},
		"two objects":   {`{"phase_artifacts": {"run": {"commands": ["true"]}}} {}`, "data after the JSON object"},
		"no artifacts":  {`{"plan": "x"}`, `no "phase_artifacts"`},
		"no commands":   {`{"phase_artifacts": {"coding": {"workspace": {"files": [{"path": "a.c", "content": ""}]}}}}`, "no commands"},
		"wrong type":    {`{"phase_artifacts": {"run": {"commands": "make"}}}`, "phase_artifacts.run.commands: a string where an array belongs"},
		"wrong element": {`{"phase_artifacts": {"run": {"commands": ["make", 1]}}}`, "phase_artifacts.run.commands.1: a number where a string belongs"},
		"traversal":     {withFile("../../etc/passwd"), `"../../etc/passwd"`},
		"absolute":      {withFile("/etc/cron.d/x"), `"/etc/cron.d/x"`},
		"control char":  {withFile("a\u202eb.c"), "U+202E"},
		"duplicate":     {`{"phase_artifacts": {"coding": {"workspace": {"files": [{"path": "a", "content": ""}, {"path": "a", "content": ""}]}}, "run": {"commands": ["true"]}}}`, "duplicate path"},
		"bad mode":      {`{"phase_artifacts": {"coding": {"workspace": {"files": [{"path": "a", "content": "", "mode": "4755"}]}}, "run": {"commands": ["true"]}}}`, `"4755"`},
		"bad metric re": {`{"phase_artifacts": {"run": {"commands": ["true"], "metric_patterns": [{"name": "x", "regex": "("}]}}}`, "metric_patterns"},
		"huge":          {`{"phase_artifacts": {"run": {"commands": ["` + strings.Repeat("x", MaxPayloadBytes) + `"]}}}`, "at most"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseArtifacts(tc.payload)
			require.ErrorIs(t, err, ErrArtifacts)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// FuzzParseArtifacts: any reply payload is accepted or refused cleanly; what
// is accepted passes the workspace checks.
func FuzzParseArtifacts(f *testing.F) {
	f.Add(good)
	f.Add(`{"phase_artifacts": {"run": {"commands": ["true"]}}}`)
	f.Add("```\n{}\n```")
	f.Fuzz(func(t *testing.T, payload string) {
		a, err := ParseArtifacts(payload)
		if err != nil {
			require.ErrorIs(t, err, ErrArtifacts)
			return
		}
		for _, file := range a.Phases.Coding.Workspace.Files {
			require.False(t, strings.HasPrefix(file.Path, "/"))
			require.NotContains(t, "/"+file.Path+"/", "/../")
		}
	})
}

// fakeModel is an httptest server speaking the OpenAI chat API that answers
// with the next scripted reply.
func fakeModel(t *testing.T, replies ...string) (*llm.OpenAI, *[]string) {
	t.Helper()
	var mu sync.Mutex
	var prompts []string
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []llm.Message `json:"messages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		prompts = append(prompts, body.Messages[len(body.Messages)-1].Content)
		reply := replies[min(n, len(replies)-1)]
		n++
		mu.Unlock()
		out, _ := json.Marshal(map[string]any{"id": "x", "object": "chat.completion", "model": "m",
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": reply}, "finish_reason": "stop"}},
			"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 10}})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	c, err := llm.NewOpenAI(llm.OpenAIOptions{BaseURL: srv.URL + "/v1", Model: "m", Logger: testutil.Logger(t)})
	require.NoError(t, err)
	return c, &prompts
}

func newMemory(t *testing.T) *memory.Memory {
	t.Helper()
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "m.sqlite"), sqlite.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	m := memory.New(s, memory.Config{}, memory.Options{Logger: testutil.Logger(t)})
	_, err = m.Fork(context.Background(), "n1", "")
	require.NoError(t, err)
	return m
}

func ask() []llm.Message {
	return []llm.Message{{Role: "system", Content: "You write HPC code."}, {Role: "user", Content: "Write a stencil."}}
}

// TestGenerateRetriesWithFeedback: a reply without the memory block, then
// one with a path traversal, then a good one: the model hears each reason,
// the memory gets the good reply's writes, and the artifacts come back.
func TestGenerateRetriesWithFeedback(t *testing.T) {
	t.Parallel()
	bad := `<memory_update>{"core": {"tried": "escape"}}</memory_update>` +
		`{"phase_artifacts": {"coding": {"workspace": {"files": [{"path": "../x.c", "content": ""}]}}, "run": {"commands": ["true"]}}}`
	okReply := `<memory_update>{"core": {"approach": "tiling"}, "archival": [{"text": "tile 32 first", "tags": ["idea"]}]}</memory_update>` + good
	c, prompts := fakeModel(t, good, bad, okReply)
	m := newMemory(t)
	var seen []Exchange
	a, err := Generate(context.Background(), GenerateParams{Client: c, Messages: ask(), Memory: m, Branch: "n1",
		RequireMemoryUpdate: true, Purpose: "draft", Node: "n1", Observe: func(e Exchange) { seen = append(seen, e) }})
	require.NoError(t, err)
	require.Equal(t, "src/stencil.c", a.Phases.Coding.Workspace.Files[0].Path)
	require.Len(t, seen, 3)
	require.Contains(t, (*prompts)[1], "could not be used: memory: reply does not start with a <memory_update> block")
	require.Contains(t, (*prompts)[2], `"../x.c"`)
	e, ok, err := m.CoreGet(context.Background(), "n1", "approach")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "tiling", e.Value)
	// The rejected reply's memory writes were applied (they are the model's
	// notes, valid on their own); its artifacts were not used.
	_, ok, err = m.CoreGet(context.Background(), "n1", "tried")
	require.NoError(t, err)
	require.True(t, ok)
}

// TestGenerateReadRounds: a reply that reads memory gets the results and
// answers again within the same attempt.
func TestGenerateReadRounds(t *testing.T) {
	t.Parallel()
	m := newMemory(t)
	_, _, err := m.ArchivalWrite(context.Background(), memory.ArchivalWriteParams{Branch: "n1", Text: "blocking 64 beat 32 on this CPU"})
	require.NoError(t, err)
	read := `<memory_update>{"archival_search": {"query": "blocking", "k": 3}}</memory_update>`
	c, prompts := fakeModel(t, read, `<memory_update>{}</memory_update>`+good)
	a, err := Generate(context.Background(), GenerateParams{Client: c, Messages: ask(), Memory: m, Branch: "n1", RequireMemoryUpdate: true})
	require.NoError(t, err)
	require.NotEmpty(t, a.Phases.Compile.Commands)
	require.Contains(t, (*prompts)[1], "blocking 64 beat 32")
	require.Contains(t, (*prompts)[1], "<memory_results>")
}

// TestGenerateGivesUp: replies that never become usable make the node buggy
// with the last reason; a client failure ends at once.
func TestGenerateGivesUp(t *testing.T) {
	t.Parallel()
	c, prompts := fakeModel(t, "I cannot help with that.")
	_, err := Generate(context.Background(), GenerateParams{Client: c, Messages: ask(), Retries: 2})
	require.ErrorIs(t, err, ErrUnusable)
	require.ErrorIs(t, err, ErrArtifacts)
	require.ErrorContains(t, err, "after 3 replies")
	require.Len(t, *prompts, 3)

	// The first reply spends the budget; the retry is refused by the client,
	// which ends the generation at once, not as an unusable reply.
	_, err = Generate(context.Background(), GenerateParams{Client: &llm.Metered{Client: c, Budget: llm.Budget{MaxTokens: 1}}, Messages: ask(), Retries: 5, Purpose: "draft", Node: "n9"})
	require.ErrorIs(t, err, llm.ErrBudget)
	require.NotErrorIs(t, err, ErrUnusable)
	require.ErrorContains(t, err, "draft of n9")
	require.Len(t, *prompts, 4)
}

// TestLogs: every exchange of Generate lands in the node's two prompt log
// files (nodes/<id>/prompts.md and prompts.jsonl), as md and as one JSON line, numbered per node (and on from where the
// log ends when the run is resumed), secrets redacted; hostile names are
// refused.
func TestLogs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logs := &Logs{Dir: dir}
	t.Cleanup(func() { require.NoError(t, logs.Close()) })
	c, _ := fakeModel(t, "no json here", good)
	msgs := ask()
	msgs[1].Content += " Use OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwxyz1234."
	_, err := Generate(context.Background(), GenerateParams{Client: c, Messages: msgs, Purpose: "draft", Node: "n1",
		Observe: func(e Exchange) { require.NoError(t, logs.Write("n1", "draft", e)) }})
	require.NoError(t, err)
	files, err := filepath.Glob(filepath.Join(dir, "nodes", "n1", "*"))
	require.NoError(t, err)
	require.Len(t, files, 2)
	require.Equal(t, []string{"prompts.jsonl", "prompts.md"}, []string{filepath.Base(files[0]), filepath.Base(files[1])})
	md, err := os.ReadFile(filepath.Join(dir, "nodes", "n1", "prompts.md"))
	require.NoError(t, err)
	require.Regexp(t, `(?m)^# 001 draft of n1 \(attempt 1\), 20\d\d-`, string(md))
	require.Regexp(t, `(?m)^# 002 draft of n1 \(attempt 2\), `, string(md))
	require.Less(t, strings.Index(string(md), "# 001 "), strings.Index(string(md), "# 002 "))
	require.Contains(t, string(md), "could not be used")
	require.Contains(t, string(md), "## reply (m, 10 tokens in, 10 out)")
	require.NotContains(t, string(md), "sk-abcdefghij")
	recs := readLog(t, filepath.Join(dir, "nodes", "n1", "prompts.jsonl"))
	require.Len(t, recs, 2)
	require.Equal(t, "no json here", recs[0].Reply)
	require.Equal(t, []int{1, 2}, []int{recs[0].N, recs[1].N})
	require.Equal(t, []int{1, 2}, []int{recs[0].Attempt, recs[1].Attempt})
	require.NotContains(t, recs[0].Messages[1].Content, "sk-abcdefghij")

	// Resumed in another process: the numbers go on, nothing is overwritten.
	again := &Logs{Dir: dir}
	t.Cleanup(func() { require.NoError(t, again.Close()) })
	require.NoError(t, again.Write("n1", "summary", Exchange{Attempt: 1, Response: llm.Response{Content: "later"}}))
	recs = readLog(t, filepath.Join(dir, "nodes", "n1", "prompts.jsonl"))
	require.Len(t, recs, 3)
	require.Equal(t, 3, recs[2].N)
	require.Equal(t, "summary", recs[2].Purpose)
	md, err = os.ReadFile(filepath.Join(dir, "nodes", "n1", "prompts.md"))
	require.NoError(t, err)
	require.Regexp(t, `(?m)^# 003 summary of n1 \(attempt 1\), `, string(md))
	require.Contains(t, string(md), "# 001 draft of n1")

	// Exchanges of several nodes at once: each node's numbers are 1..k.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				assert.NoError(t, again.Write(fmt.Sprintf("c%d", i), "draft", Exchange{Attempt: 1}))
			}
		}()
	}
	wg.Wait()
	for i := range 8 {
		recs := readLog(t, filepath.Join(dir, "nodes", fmt.Sprintf("c%d", i), "prompts.jsonl"))
		require.Len(t, recs, 5)
		for k, r := range recs {
			require.Equal(t, k+1, r.N)
		}
	}
	for _, bad := range []string{"../x", "", ".hidden", "a/b", strings.Repeat("x", 200)} {
		require.Error(t, logs.Write(bad, "draft", Exchange{}), bad)
		require.Error(t, logs.Write("n1", bad+"/", Exchange{}), bad)
	}
}

// readLog reads a node's prompt log records.
func readLog(t *testing.T, path string) []LogRecord {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var recs []LogRecord
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		var r LogRecord
		require.NoError(t, json.Unmarshal([]byte(line), &r), line)
		recs = append(recs, r)
	}
	return recs
}

// TestLogsOpenFiles: a node's two files stay open between its exchanges,
// for the last MaxOpenNodes nodes at most; Done and Close close them, and
// writing after either opens them again, numbering on.
func TestLogsOpenFiles(t *testing.T) {
	// Not parallel: it counts the process's open files.
	openFDs := func() int {
		fds, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip("no /proc/self/fd to count open files:", err)
		}
		return len(fds)
	}
	dir := t.TempDir()
	logs := &Logs{Dir: dir}
	before := openFDs()
	nodes := MaxOpenNodes + 40
	for round := range 2 {
		for i := range nodes {
			require.NoError(t, logs.Write(fmt.Sprintf("n%d", i), "draft", Exchange{Attempt: round + 1}))
		}
		require.LessOrEqual(t, openFDs()-before, 2*MaxOpenNodes, "round %d", round)
	}
	require.NoError(t, logs.Write("n0", "summary", Exchange{Attempt: 1}))
	logs.Done("n0")
	require.NoError(t, logs.Write("n0", "summary", Exchange{Attempt: 2}))
	require.NoError(t, logs.Close())
	// Files of other tests' Logs may be closed by the GC meanwhile: fewer.
	require.LessOrEqual(t, openFDs(), before, "files left open after Close")
	require.NoError(t, logs.Write("n1", "summary", Exchange{Attempt: 1}))
	require.NoError(t, logs.Close())
	for i, want := range map[int][]string{0: {"draft", "draft", "summary", "summary"}, 1: {"draft", "draft", "summary"}, nodes - 1: {"draft", "draft"}} {
		recs := readLog(t, filepath.Join(dir, "nodes", fmt.Sprintf("n%d", i), "prompts.jsonl"))
		var got []string
		for k, r := range recs {
			require.Equal(t, k+1, r.N)
			got = append(got, r.Purpose)
		}
		require.Equal(t, want, got, "n%d", i)
		md, err := os.ReadFile(filepath.Join(dir, "nodes", fmt.Sprintf("n%d", i), "prompts.md"))
		require.NoError(t, err)
		require.Equal(t, len(want), strings.Count(string(md), "\n# 0")+1, "n%d: %s", i, md)
	}
}

// BenchmarkParseArtifacts: a reply with a C file of 6 KB, as a model
// writes one.
func BenchmarkParseArtifacts(b *testing.B) {
	var code strings.Builder
	for i := 0; code.Len() < 6000; i++ {
		fmt.Fprintf(&code, "static void sweep_%d(double *restrict out, const double *restrict in, int n) {\n#pragma omp parallel for\n    for (int i = 1; i < n - 1; i++) out[i] = 0.5 * (in[i - 1] + in[i + 1]); /* \"halo\" */\n}\n", i)
	}
	content, _ := json.Marshal(code.String())
	payload := `{"phase_artifacts": {"download": {"commands": []}, "coding": {"workspace": {"root": ".", "files": [{"path": "stencil.c", "content": ` + string(content) +
		`}]}}, "compile": {"commands": ["gcc -O3 -fopenmp -o stencil stencil.c"]}, "run": {"commands": ["./stencil"], "metric_patterns": [{"name": "gflops", "regex": "GFLOPS: ([0-9.]+)"}]}}}`
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if _, err := ParseArtifacts(payload); err != nil {
			b.Fatal(err)
		}
	}
}

// wireV1 is phase_artifacts as encoding/json read it before the reply
// decoder: what decodeReply must read the same.
type wireV1 struct {
	PhaseArtifacts *struct {
		Download struct {
			Commands []string `json:"commands"`
			Notes    string   `json:"notes"`
		} `json:"download"`
		Coding struct {
			Workspace struct {
				Root  string          `json:"root"`
				Tree  json.RawMessage `json:"tree"`
				Files []schema.File   `json:"files"`
			} `json:"workspace"`
		} `json:"coding"`
		Compile struct {
			BuildPlan json.RawMessage `json:"build_plan"`
			Commands  []string        `json:"commands"`
		} `json:"compile"`
		Run struct {
			Commands        []string               `json:"commands"`
			ExpectedOutputs []string               `json:"expected_outputs"`
			MetricPatterns  []schema.MetricPattern `json:"metric_patterns"`
		} `json:"run"`
	} `json:"phase_artifacts"`
	Constraints json.RawMessage `json:"constraints"`
}

// FuzzDecodeReplyAsV1: a payload decodeReply reads gives what
// encoding/json read from it, and one encoding/json read whole is read.
func FuzzDecodeReplyAsV1(f *testing.F) {
	f.Add(good)
	f.Add(`{"PHASE_ARTIFACTS": {"Run": {"commands": ["a"], "commands": ["b"]}, "run": {"metric_patterns": [{"name": "x", "regex": "y"}]}}}`)
	f.Add(`{"phase_artifacts": {"coding": {"workspace": {"files": [{"path": "a\xffb", "content": "\u00e9\ud800", "mode": 755}]}}}}`)
	f.Add(`{"phase_artifacts": {"compile": {"build_plan": {"steps": [1, 2.5e3, null]}}}, "constraints": [true]}`)
	f.Fuzz(func(t *testing.T, text string) {
		var old wireV1
		dec := json.NewDecoder(strings.NewReader(text))
		oldErr := dec.Decode(&old)
		if oldErr == nil && strings.TrimSpace(text[dec.InputOffset():]) != "" {
			// ParseArtifacts asked dec.More, which let a "}" or "]" after
			// the object pass: decodeReply refuses any data after it.
			oldErr = errors.New("data after")
		}
		var w wire
		err := decodeReply(text, &w)
		if (err == nil) != (oldErr == nil) {
			t.Fatalf("%q: read with %v; encoding/json: %v", text, err, oldErr)
		}
		if err != nil || old.PhaseArtifacts == nil {
			if err == nil && w.PhaseArtifacts != nil {
				t.Fatalf("%q: phase_artifacts read where encoding/json found none", text)
			}
			return
		}
		o, n := old.PhaseArtifacts, w.PhaseArtifacts
		same := reflect.DeepEqual(o.Download.Commands, n.Download.Commands) && o.Download.Notes == n.Download.Notes &&
			reflect.DeepEqual(o.Coding.Workspace.Files, n.Coding.Workspace.Files) && o.Coding.Workspace.Root == n.Coding.Workspace.Root &&
			reflect.DeepEqual(o.Compile.Commands, n.Compile.Commands) && reflect.DeepEqual(o.Run.Commands, n.Run.Commands) &&
			reflect.DeepEqual(o.Run.ExpectedOutputs, n.Run.ExpectedOutputs) && reflect.DeepEqual(o.Run.MetricPatterns, n.Run.MetricPatterns) &&
			compactEq(o.Compile.BuildPlan, n.Compile.BuildPlan) && compactEq(old.Constraints, w.Constraints) && compactEq(o.Coding.Workspace.Tree, n.Coding.Workspace.Tree)
		if !same {
			t.Fatalf("%q: read %+v; encoding/json read %+v", text, *n, *o)
		}
	})
}

// compactEq says whether two raw JSON values are the same once compacted
// (nil and absent alike).
func compactEq(a, b []byte) bool {
	var ca, cb bytes.Buffer
	ea, eb := json.Compact(&ca, a), json.Compact(&cb, b)
	return (ea == nil) == (eb == nil) && bytes.Equal(ca.Bytes(), cb.Bytes())
}
