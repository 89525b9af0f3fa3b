package session

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/fakellm"
	"github.com/hpcq/hpcq/internal/run"
	"github.com/hpcq/hpcq/internal/runview"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/rundir"
)

func testSpec(t *testing.T) run.Spec {
	s := run.Defaults()
	s.Idea = "Print a score."
	s.Metric = run.Metric{Name: "score", Direction: "maximize"}
	s.LLM.Model = "test-model"
	require.NoError(t, s.Validate())
	return s
}

// TestSessionCountsEveryCall: one session's calls are metered once: its
// usage is saved in usage.json (a second session of the run, a resume or
// the paper after the search, starts from it), each is a row of llm_calls,
// and Close leaves nothing unwritten.
func TestSessionCountsEveryCall(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run-session")
	srv := fakellm.New(t, func(fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Content: "ok", TokensIn: 10, TokensOut: 5}
	})
	client, err := llm.NewOpenAI(llm.OpenAIOptions{BaseURL: srv.BaseURL(), APIKey: "k", Model: "test-model", MaxAttempts: 1, Logger: testutil.Logger(t)})
	require.NoError(t, err)
	db := filepath.Join(t.TempDir(), "hpcq.sqlite")
	sink, err := results.OpenSQLite(db)
	require.NoError(t, err)
	defer sink.Close()
	open := func() *Session {
		s, err := Open(Params{Spec: testSpec(t), RunDir: dir, LLM: client, Results: sink, Logger: testutil.Logger(t)})
		require.NoError(t, err)
		return s
	}
	s := open()
	require.Equal(t, "run-session", s.RunID)
	require.True(t, filepath.IsAbs(s.Dir))
	require.Nil(t, s.Memory, "no store: no memory")
	require.NotNil(t, s.Logs, "log_prompts is on by default")
	for range 2 {
		_, err := s.Client.Chat(context.Background(), llm.Request{Purpose: "judge", Node: "n0001",
			Messages: []llm.Message{{Role: "user", Content: "hi"}}})
		require.NoError(t, err)
	}
	s.Close()
	u, err := runview.ReadUsage(dir)
	require.NoError(t, err)
	require.EqualValues(t, 2, u.Calls)
	require.EqualValues(t, 20, u.TokensIn)

	again := open()
	require.EqualValues(t, 2, again.Client.Usage().Calls, "a second session starts from the run's usage")
	again.Close()
	tab, err := results.QuerySQLite(context.Background(), db, "SELECT count(*) AS n FROM llm_calls WHERE run = 'run-session' AND purpose = 'judge'")
	require.NoError(t, err)
	require.EqualValues(t, 2, tab.Rows[0][0])
}

// TestConfigRefused: the endpoint refusing the run's configuration calls
// what the engine set, once; without it the refusal is logged, and a
// session's hook can be taken back.
func TestConfigRefused(t *testing.T) {
	srv := fakellm.New(t, func(fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Status: 401, Content: `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`}
	})
	client, err := llm.NewOpenAI(llm.OpenAIOptions{BaseURL: srv.BaseURL(), APIKey: "bad", Model: "test-model", MaxAttempts: 1, Logger: testutil.Logger(t)})
	require.NoError(t, err)
	s, err := Open(Params{Spec: testSpec(t), RunDir: t.TempDir(), LLM: client, Logger: testutil.Logger(t)})
	require.NoError(t, err)
	defer s.Close()
	refused := make(chan error, 4)
	s.OnConfigRefused(func(err error) { refused <- err })
	ask := func() {
		_, _ = s.Client.Chat(context.Background(), llm.Request{Purpose: "judge", Messages: []llm.Message{{Role: "user", Content: "hi"}}})
	}
	ask()
	select {
	case err := <-refused:
		require.ErrorContains(t, err, "401")
	case <-time.After(10 * time.Second):
		t.Fatal("the refusal did not reach the hook")
	}
	s.OnConfigRefused(nil)
	ask() // logged, no hook: no panic
	require.Empty(t, refused)
}

// TestSectionWithoutMemory: a section over its budget is cut with a
// marker, between runes, when the run has no memory to compress it.
func TestSectionWithoutMemory(t *testing.T) {
	spec := testSpec(t)
	spec.Memory.SectionBudgets = map[string]int{"idea_section_limit": 80}
	spec.Idea = strings.Repeat("é", 100)
	s, err := Open(Params{Spec: spec, RunDir: t.TempDir(), Logger: testutil.Logger(t)})
	require.NoError(t, err)
	defer s.Close()
	got := s.IdeaSection(context.Background())
	require.LessOrEqual(t, len(got), 80)
	require.Contains(t, got, "[... cut to 80 of 200 chars ...]")
	require.Equal(t, "short", s.Section(context.Background(), "short", "idea_section_limit", ""))
	_, err = os.Stat(filepath.Join(s.Dir, rundir.JournalDir))
	require.NoError(t, err, "the run's journal directory is made")
}

// TestOpenRefusesABadSpec: no directory, or a spec that does not validate.
func TestOpenRefusesABadSpec(t *testing.T) {
	_, err := Open(Params{Spec: testSpec(t)})
	require.ErrorContains(t, err, "RunDir")
	bad := testSpec(t)
	bad.Metric.Name = ""
	_, err = Open(Params{Spec: bad, RunDir: t.TempDir()})
	require.Error(t, err)
}
