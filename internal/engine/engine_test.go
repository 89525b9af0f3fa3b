package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hpcq/hpcq/internal/local"
	"github.com/hpcq/hpcq/internal/session"
	"github.com/hpcq/hpcq/internal/tree"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/executor"
	"github.com/hpcq/hpcq/internal/fakellm"
	"github.com/hpcq/hpcq/internal/run"
	"github.com/hpcq/hpcq/internal/search"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/memory/sqlite"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// script is a node whose run prints score.
func script(score int) string {
	return fakellm.Artifacts([]fakellm.File{{Path: "run.sh", Content: fmt.Sprintf("echo computing\necho 'METRIC score=%d points'\n", score)}},
		[]string{"bash -n run.sh"}, []string{"bash run.sh"})
}

const emptyUpdate = "{}"

// normal answers every kind correctly; score grows with each node reply.
func normal(r fakellm.Request) fakellm.Reply {
	switch r.Kind {
	case "phase0":
		return fakellm.Reply{Content: fakellm.WithMemory(`{"core": {"PHASE0_SUMMARY": "print the score"}}`, fakellm.Plan("a shell script")), TokensIn: 100, TokensOut: 50}
	case "draft", "debug", "improve", "hyperparam", "ablation":
		score := 10 + r.KindN // hyperparam and ablation nodes repeat the drafts' files: cache hits
		if r.Kind == "improve" || r.Kind == "debug" {
			score += 100
		}
		return fakellm.Reply{Content: fakellm.WithMemory(`{"archival": [{"text": "wrote run.sh", "tags": ["`+r.Kind+`"]}]}`, script(score)),
			TokensIn: 200, TokensOut: 100}
	case "summarize":
		return fakellm.Reply{Content: `{"summary": "earlier events folded"}`}
	}
	return fakellm.Reply{Status: 400}
}

type env struct {
	sp  session.Params
	p   Params
	srv *fakellm.Server
	dir string
}

func newSpec(t *testing.T) run.Spec {
	s := run.Defaults()
	s.Idea = "Print a score as high as possible."
	s.Metric = run.Metric{Name: "score", Direction: "maximize", Unit: "points"}
	s.Stages = run.Stages{InitialImplementation: run.Stage{MaxIterations: 2}}
	s.Search.NumDrafts = 2
	s.LLM.Model = "test-model"
	s.Limits.RunTimeoutS = 30
	require.NoError(t, s.Validate())
	return s
}

// setup starts a local cluster (embedded NATS, one real worker with the
// phases executor), the run's SQLite files and the fake endpoint.
func setup(t *testing.T, spec run.Spec, handle func(fakellm.Request) fakellm.Reply, dir string) env {
	t.Helper()
	if dir == "" {
		dir = filepath.Join(t.TempDir(), "run-test")
	}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "memory"), 0o755))
	log := testutil.Logger(t)
	sink, err := results.OpenSQLite(filepath.Join(dir, "hpcq.sqlite"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = sink.Close() })
	ctx := context.Background()
	// As `scheduler run --local`: the run's own image is its workers' to use.
	var phases executor.Config
	if spec.Container != nil {
		phases.Images.Own = []string{spec.Container.Image}
	}
	l, err := local.Start(ctx, local.Params{RunDir: dir, Logger: log, GatewayInstaller: true, Phases: phases,
		Worker: worker.Config{Pools: []string{"cpu"}, Slots: 2, Cores: 2, Results: sink}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	store, err := sqlite.Open(filepath.Join(dir, "memory", "memory.sqlite"), sqlite.Options{Run: filepath.Base(dir)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	srv := fakellm.New(t, handle)
	client, err := llm.NewOpenAI(llm.OpenAIOptions{BaseURL: srv.BaseURL(), APIKey: "test-key", Model: "test-model", MaxAttempts: 3,
		Backoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, IdleTimeout: 8 * time.Second, Logger: log})
	require.NoError(t, err)
	return env{srv: srv, dir: dir, sp: session.Params{Spec: spec, RunDir: dir, LLM: client, MemoryStore: store, Results: sink, Logger: log},
		p: Params{Queue: l.Queue, Results: sink, WorkersWriteResults: true, Mode: "local", Gateway: l.Conn}}
}

func readOutcome(t *testing.T, dir, node string) rundir.Outcome {
	var o rundir.Outcome
	ok, err := rundir.ReadJSON(filepath.Join(dir, nodesDir, node, outcomeFile), &o)
	require.NoError(t, err)
	require.True(t, ok, "node %s has no result.json", node)
	return o
}

// TestWholeRunWithHostileReplies: a run over a real worker where the
// endpoint misbehaves in every documented way. Transport faults are
// retried; unusable replies are retried with feedback, then make the node
// buggy with the reason; the run completes every stage.
func TestWholeRunWithHostileReplies(t *testing.T) {
	t.Parallel()
	spec := newSpec(t)
	spec.Stages = run.Stages{InitialImplementation: run.Stage{MaxIterations: 6}, BaselineTuning: run.Stage{MaxIterations: 1},
		AblationStudies: run.Stage{MaxIterations: 1}}
	spec.Search.NumDrafts, spec.Search.Slots, spec.LLM.Retries = 6, 1, 1
	zero := 0.0
	spec.Search.DebugProb = &zero
	huge := strings.Repeat("x", 17<<20)
	handle := func(r fakellm.Request) fakellm.Reply {
		switch {
		case r.N == 1:
			return fakellm.Reply{Status: 429, Header: map[string]string{"Retry-After": "0"}} // retried
		case r.Kind == "phase0" && r.KindN == 3:
			return fakellm.Reply{Delay: 9 * time.Second} // longer than the client's idle timeout: retried
		case r.Kind != "draft":
		case r.KindN == 2 && r.Attempt == 1:
			return fakellm.Reply{Content: script(12)} // no memory block: feedback, retried
		case r.KindN == 3:
			return fakellm.Reply{Content: fakellm.WithMemory(emptyUpdate, "Sure! Here is the code you asked for.")}
		case r.KindN == 4:
			full := fakellm.WithMemory(emptyUpdate, script(99))
			return fakellm.Reply{Content: full[:len(full)/2], FinishReason: "length"}
		case r.KindN == 5:
			return fakellm.Reply{Content: fakellm.WithMemory(emptyUpdate, fakellm.Artifacts([]fakellm.File{{Path: "../escape.sh", Content: "echo hi"}},
				nil, []string{"bash ../escape.sh"}))}
		case r.KindN == 6:
			return fakellm.Reply{Content: fakellm.WithMemory(emptyUpdate, script(1)+huge)}
		}
		return normal(r)
	}
	e := setup(t, spec, handle, "")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sum, err := runEngine(t, ctx, e.sp, e.p)
	require.NoError(t, err)
	require.Equal(t, 8, sum.Nodes)
	require.True(t, sum.HasBest)

	nodes := map[string]tree.Node{}
	tree, err := search.OpenTree(filepath.Join(e.dir, journalDir, "tree.journal"))
	require.NoError(t, err)
	for _, n := range tree.Nodes() {
		nodes[n.ID] = n
		require.True(t, n.Done, n.ID)
	}
	require.NoError(t, tree.Close())
	require.False(t, nodes["n0001"].Buggy, nodes["n0001"].Reason)
	require.False(t, nodes["n0002"].Buggy, "a reply without the memory block is retried with feedback: %s", nodes["n0002"].Reason)
	require.Equal(t, 12.0, nodes["n0002"].Metric)
	for id, want := range map[string]string{"n0003": "must be one JSON object", "n0004": "the reply was cut at its output limit", "n0005": "..", "n0006": "bytes"} {
		require.True(t, nodes[id].Buggy, id)
		if id == "n0004" { // a cut reply is its own reason, not the JSON it cut
			require.NotContains(t, nodes[id].Reason, "JSON", id)
		} else {
			require.Contains(t, nodes[id].Reason, "no usable reply after 2 replies", id)
		}
		require.Contains(t, nodes[id].Reason, want, id)
		o := readOutcome(t, e.dir, id)
		require.Nil(t, o.Result, "%s never ran", id)
	}
	// The hyperparam and ablation replies are n0001's files again: the
	// result cache answers them without a run.
	require.Equal(t, 2, sum.CacheHits)
	require.True(t, readOutcome(t, e.dir, "n0007").Cached)
	require.Equal(t, search.Hyperparam, nodes["n0007"].Kind)
	require.Equal(t, search.Ablation, nodes["n0008"].Kind)
	require.Equal(t, 4, nodes["n0008"].Stage)

	// The feedback named the problem.
	var sawFeedback bool
	for _, r := range e.srv.Requests() {
		if r.Kind == "draft" && r.KindN == 2 && r.Attempt == 2 {
			sawFeedback = strings.Contains(r.Last(), "memory_update")
		}
	}
	require.True(t, sawFeedback, "the retry of a reply without the block says what was missing")

	// Outputs.
	for _, f := range []string{"tree.json", "tree.html", "report.md", "memory/final_memory_for_paper.md", "memory/final_memory_for_paper.json",
		"nodes/n0001/phase0_plan.json", "nodes/n0001/phase0_llm_output.txt", "nodes/n0001/phase0_history_full.json"} {
		require.FileExists(t, filepath.Join(e.dir, f))
	}
	// Phase 0 of the last node was given the run so far: a line for each
	// node finished before it (made once per node, then reused).
	var given map[string]string
	data, err := os.ReadFile(filepath.Join(e.dir, "nodes", "n0008", "phase0_history_full.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &given))
	require.Contains(t, given["history"], "This run so far:\n")
	require.Regexp(t, `(?m)^- n0001 \(draft, stage [a-z_]+\): score = 11 points$`, given["history"])
	require.Regexp(t, `(?m)^- n0003 \(draft, stage [a-z_]+\): buggy: draft: no usable reply after 2 replies`, given["history"])
	require.Regexp(t, `(?m)^- n0007 \(hyperparam, stage [a-z_]+, from n000\d\): `, given["history"])
	require.NotContains(t, given["history"], "- n0008 ")
	rep, err := os.ReadFile(filepath.Join(e.dir, "report.md"))
	require.NoError(t, err)
	require.Contains(t, string(rep), "## Failures met")
	require.Contains(t, string(rep), "## Stages")
	require.Regexp(t, "(?m)^### Its code\n\n#### [^\n]+\n\n```\n", string(rep), "the best node's files one level below its heading")
	md, err := os.ReadFile(filepath.Join(e.dir, "nodes", "n0002", "prompts.md"))
	require.NoError(t, err)
	require.Contains(t, string(md), "# 001 phase0 of n0002 (attempt 1)")
	require.FileExists(t, filepath.Join(e.dir, "nodes", "n0002", "prompts.jsonl"))
	require.NoDirExists(t, filepath.Join(e.dir, "plans"))
	require.NoDirExists(t, filepath.Join(e.dir, "prompt_logs"))

	// Results: every LLM call in llm_calls, the nodes with their stage.
	tab, err := results.QuerySQLite(ctx, filepath.Join(e.dir, "hpcq.sqlite"), "SELECT count(*) FROM llm_calls")
	require.NoError(t, err)
	require.EqualValues(t, sum.Usage.Calls, tab.Rows[0][0])
	tab, err = results.QuerySQLite(ctx, filepath.Join(e.dir, "hpcq.sqlite"), "SELECT node, stage, status FROM nodes ORDER BY node")
	require.NoError(t, err)
	require.Len(t, tab.Rows, 8)
	require.Equal(t, "n0003 1 not_run\n", fmt.Sprintln(tab.Rows[2]...), "no usable reply: it never ran")
	require.Equal(t, "n0008 4 cached\n", fmt.Sprintln(tab.Rows[7]...))
}

// TestBudgetStopsExpansion: once the token budget is spent no new node is
// started, the nodes in flight finish, and the report says why.
func TestBudgetStopsExpansion(t *testing.T) {
	t.Parallel()
	spec := newSpec(t)
	spec.Stages.InitialImplementation.MaxIterations = 20
	spec.Search.NumDrafts, spec.Search.Slots = 20, 1
	spec.LLM.Budget.MaxTokens = 1000 // phase0 150 + draft 300 per node: spent in the third node
	e := setup(t, spec, normal, "")
	sum, err := runEngine(t, context.Background(), e.sp, e.p)
	require.NoError(t, err)
	require.Contains(t, sum.StoppedBy, "budget")
	require.Less(t, sum.Nodes, 20)
	require.GreaterOrEqual(t, sum.Nodes, 2)
	rep, err := os.ReadFile(filepath.Join(e.dir, "report.md"))
	require.NoError(t, err)
	require.Contains(t, string(rep), "The search stopped early: budget")
	tab, err := results.QuerySQLite(context.Background(), filepath.Join(e.dir, "hpcq.sqlite"), "SELECT status FROM runs")
	require.NoError(t, err)
	require.Equal(t, "stopped", fmt.Sprint(tab.Rows[0][0]))
}

// TestResumeRunsNothingTwice: a run interrupted while a node runs is
// resumed from its directory: finished nodes are kept as they were, the
// interrupted node is answered (not run again), the tree completes.
func TestResumeRunsNothingTwice(t *testing.T) {
	t.Parallel()
	spec := newSpec(t)
	spec.Stages.InitialImplementation.MaxIterations = 4
	spec.Search.NumDrafts, spec.Search.Slots = 4, 1
	slow := func(r fakellm.Request) fakellm.Reply {
		rep := normal(r)
		if r.Kind == "draft" {
			rep.Content = fakellm.WithMemory(emptyUpdate, fakellm.Artifacts([]fakellm.File{{Path: "run.sh",
				Content: fmt.Sprintf("sleep 1\necho 'METRIC score=%d'\n", r.KindN)}}, nil, []string{"bash run.sh"}))
		}
		return rep
	}
	dir := filepath.Join(t.TempDir(), "run-resume")
	e := setup(t, spec, slow, dir)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		testutil.Eventually(t, time.Minute, "two nodes finished", func() bool {
			m, _ := filepath.Glob(filepath.Join(dir, nodesDir, "*", outcomeFile))
			return len(m) >= 2
		})
		cancel()
	}()
	_, err := runEngine(t, ctx, e.sp, e.p)
	require.ErrorIs(t, err, context.Canceled)
	before := map[string][]byte{}
	done, _ := filepath.Glob(filepath.Join(dir, nodesDir, "*", outcomeFile))
	for _, f := range done {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		before[f] = data
	}
	draftsBefore := e.srv.Count("draft")
	// A draft asked for when the cancel came has no task yet: its reply was
	// lost with the run and it is asked for again (at most one: one slot).
	published, _ := filepath.Glob(filepath.Join(dir, nodesDir, "*", taskFile))
	lost := draftsBefore - len(published)
	require.LessOrEqual(t, lost, 1, "at most the request in flight at the cancel is lost")

	sum, err := runEngine(t, context.Background(), e.sp, e.p)
	require.NoError(t, err)
	require.Equal(t, 4, sum.Nodes)
	for f, data := range before {
		now, err := os.ReadFile(f)
		require.NoError(t, err)
		require.Equal(t, string(data), string(now), "a finished node is kept as it was")
	}
	require.Equal(t, 4+lost, e.srv.Count("draft"), "every published node's code was asked for once (before the resume: %d, %d published)",
		draftsBefore, len(published))
	tree, err := search.OpenTree(filepath.Join(dir, journalDir, "tree.journal"))
	require.NoError(t, err)
	defer tree.Close()
	for _, n := range tree.Nodes() {
		require.True(t, n.Done, n.ID)
		require.False(t, n.Buggy, "%s: %s", n.ID, n.Reason)
	}
	var tj search.TreeJSON
	data, err := os.ReadFile(filepath.Join(dir, "tree.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &tj))
	require.Len(t, tj.Nodes, 4)
}

// TestIterativeInstallThroughGateway: planned download commands become the
// goal of the worker's installer, which asks the model through the run's
// gateway one command at a time; its calls are metered like the rest.
func TestIterativeInstallThroughGateway(t *testing.T) {
	t.Parallel()
	spec := newSpec(t)
	spec.Stages.InitialImplementation.MaxIterations, spec.Search.NumDrafts = 1, 1
	const fetch = "mkdir -p deps && printf 'echo METRIC score=5\\n' > deps/tool.sh"
	handle := func(r fakellm.Request) fakellm.Reply {
		switch r.Kind {
		case "draft":
			payload := fakellm.Artifacts(nil, nil, []string{"bash deps/tool.sh"})
			payload = strings.Replace(payload, `"download":{"commands":[]}`, `"download":{"commands":[`+strconvQuote(fetch)+`],"notes":"the tool is fetched"}`, 1)
			return fakellm.Reply{Content: fakellm.WithMemory(emptyUpdate, payload), TokensIn: 10, TokensOut: 10}
		case "install":
			switch r.Attempt {
			case 1:
				assert.Contains(t, r.Messages[1].Content, fetch, "the planned command is the installer's goal")
				assert.Contains(t, r.Messages[1].Content, "# Memory", "the installer sees the node's memory")
				assert.Contains(t, r.Messages[1].Content, "IDEA_SUMMARY")
				return fakellm.Reply{Content: `{"command": "test -f deps/tool.sh", "reason": "is it there?"}`, TokensIn: 5, TokensOut: 5}
			case 2:
				assert.Contains(t, r.Last(), "Exit code: 1")
				return fakellm.Reply{Content: `{"command": ` + strconvQuote(fetch) + `}`, TokensIn: 5, TokensOut: 5}
			default:
				return fakellm.Reply{Content: `{"done": true, "reason": "in place"}`, TokensIn: 5, TokensOut: 5}
			}
		}
		return normal(r)
	}
	e := setup(t, spec, handle, "")
	sum, err := runEngine(t, context.Background(), e.sp, e.p)
	require.NoError(t, err)
	require.True(t, sum.HasBest, "the node ran with what the installer put in place")
	require.Equal(t, 5.0, sum.Best.Metric)
	require.Equal(t, 3, countReqs(e.srv, "install"))
	o := readOutcome(t, e.dir, "n0001")
	require.Equal(t, "download", o.Result.Phases[1].Name)
	require.True(t, o.Result.Phases[1].OK)
	tab, err := results.QuerySQLite(context.Background(), filepath.Join(e.dir, "hpcq.sqlite"), "SELECT count(*) FROM llm_calls WHERE purpose = 'install'")
	require.NoError(t, err)
	require.EqualValues(t, 3, tab.Rows[0][0], "the gateway's calls are metered in the run")
}

func countReqs(s *fakellm.Server, kind string) int {
	n := 0
	for _, r := range s.Requests() {
		if r.Kind == kind {
			n++
		}
	}
	return n
}

func strconvQuote(s string) string {
	data, _ := json.Marshal(s)
	return string(data)
}

// TestJudgePicksTheStageBase: with search.judge the model picks the node a
// later stage starts from among the best few, and the report says so.
func TestJudgePicksTheStageBase(t *testing.T) {
	t.Parallel()
	spec := newSpec(t)
	spec.Stages = run.Stages{InitialImplementation: run.Stage{MaxIterations: 3}, AblationStudies: run.Stage{MaxIterations: 1}}
	spec.Search.NumDrafts, spec.Search.Slots, spec.Search.Judge = 3, 1, true
	handle := func(r fakellm.Request) fakellm.Reply {
		if r.Kind == "judge" {
			// Not the best by metric (n0003 has the highest score).
			return fakellm.Reply{Content: `{"best": "n0001", "reason": "the most trustworthy measurement"}`}
		}
		return normal(r)
	}
	e := setup(t, spec, handle, "")
	var progress strings.Builder
	e.p.Progress, e.p.ProgressEvery = &lockedBuilder{b: &progress}, 50*time.Millisecond
	_, err := runEngine(t, context.Background(), e.sp, e.p)
	require.NoError(t, err)
	n4 := readTask(t, e.dir, "n0004")
	require.Equal(t, "n0001", n4.ParentID, "the ablation starts from the judge's pick")
	rep, err := os.ReadFile(filepath.Join(e.dir, "report.md"))
	require.NoError(t, err)
	require.Contains(t, string(rep), "started from n0001 (judge: the most trustworthy measurement)")
	require.Contains(t, progress.String(), "best score=")
}

func readTask(t *testing.T, dir, node string) queueTask {
	var task queueTask
	ok, err := rundir.ReadJSON(filepath.Join(dir, nodesDir, node, taskFile), &task)
	require.NoError(t, err)
	require.True(t, ok)
	return task
}

type queueTask struct {
	ParentID  string            `json:"parent_id"`
	Container *schema.Container `json:"container"`
}

type lockedBuilder struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRunWithoutWorkersYet: workers that start on demand (slurm-bridge)
// come only when tasks wait: a run with no live worker at start publishes
// its first nodes at once (the default WaitWorkers is 0) and goes on,
// its first task waits in the queue, and the environment is read again once
// a worker registered.
func TestRunWithoutWorkersYet(t *testing.T) {
	t.Parallel()
	spec := newSpec(t)
	spec.Stages.InitialImplementation.MaxIterations, spec.Search.NumDrafts, spec.Search.Slots = 2, 2, 1
	e := setup(t, spec, normal, "")
	e.sp.Spec.Pool = "later" // no worker serves it yet; WaitWorkers 0: published at once
	srvDir := t.TempDir()
	go func() {
		// A worker of the pool arrives once the first task waits.
		testutil.Eventually(t, time.Minute, "the first task published", func() bool {
			m, _ := filepath.Glob(filepath.Join(e.dir, nodesDir, "*", taskFile))
			return len(m) > 0
		})
		w, err := worker.New(e.p.Queue, workerExec(t, srvDir), worker.Config{ID: "late", Pools: []string{"later"}, Slots: 1,
			Toolchains: map[string]string{"gcc": "12"}, Logger: testutil.Logger(t)})
		if err != nil {
			t.Error(err)
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		go func() { _ = w.Run(ctx) }()
	}()
	sum, err := runEngine(t, context.Background(), e.sp, e.p)
	require.NoError(t, err)
	require.Equal(t, 2, sum.Nodes)
	require.True(t, sum.HasBest)
	var second []string
	for _, r := range e.srv.Requests() {
		if r.Kind == "phase0" && r.KindN == 2 {
			second = append(second, r.Messages[1].Content)
		}
	}
	require.NotEmpty(t, second)
	require.Contains(t, second[0], "worker late", "the second node's prompt knows the worker that came")
}

func workerExec(t *testing.T, dir string) worker.Executor {
	e, err := executor.NewExecutor(executor.Config{RunsDir: dir})
	require.NoError(t, err)
	return e
}

// TestPhase0KnowsEarlierRuns: a second run of the same idea beside the
// first tells Phase 0 how the first one went.
func TestPhase0KnowsEarlierRuns(t *testing.T) {
	t.Parallel()
	spec := newSpec(t)
	spec.Stages.InitialImplementation.MaxIterations, spec.Search.NumDrafts, spec.Search.Slots = 1, 1, 1
	runs := t.TempDir()
	first := setup(t, spec, normal, filepath.Join(runs, "20261122-000001-aaaaaa"))
	_, err := runEngine(t, context.Background(), first.sp, first.p)
	require.NoError(t, err)

	second := setup(t, spec, normal, filepath.Join(runs, "20261122-000002-bbbbbb"))
	_, err = runEngine(t, context.Background(), second.sp, second.p)
	require.NoError(t, err)
	var prompt string
	for _, r := range second.srv.Requests() {
		if r.Kind == "phase0" {
			prompt = r.Messages[1].Content
		}
	}
	require.Contains(t, prompt, "Earlier runs of this idea:\n- run 20261122-000001-aaaaaa: 1 nodes, 0 buggy; best n0001 (draft) score = 11 points")
}
