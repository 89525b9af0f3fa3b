package prompt

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/fakellm"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/schema"
)

func fakeClient(t *testing.T, s *fakellm.Server) llm.Client {
	t.Helper()
	c, err := llm.NewOpenAI(llm.OpenAIOptions{BaseURL: s.BaseURL(), Model: "m", Logger: testutil.Logger(t)})
	require.NoError(t, err)
	return c
}

func requestBytes(r fakellm.Request) int {
	n := 0
	for _, m := range r.Messages {
		n += len(m.Content)
	}
	return n
}

// TestRefusedReplyIsNotSentBack: a 5 MB reply that is refused goes back to
// the endpoint as a short excerpt with the reason, not whole; the prompt
// logs keep at most MaxLoggedReply of it.
func TestRefusedReplyIsNotSentBack(t *testing.T) {
	t.Parallel()
	huge := `{"phase_artifacts": {"run": {"commands": ["` + strings.Repeat("x", 5<<20) + `"]}}, "oops"}`
	s := fakellm.New(t, func(r fakellm.Request) fakellm.Reply {
		if r.Attempt == 1 {
			return fakellm.Reply{Content: huge}
		}
		return fakellm.Reply{Content: good}
	})
	dir := t.TempDir()
	logs := &Logs{Dir: dir}
	_, err := Generate(context.Background(), GenerateParams{Client: fakeClient(t, s), Messages: ask(), Purpose: "draft", Node: "n1",
		Observe: func(e Exchange) { require.NoError(t, logs.Write("n1", "draft", e)) }})
	require.NoError(t, err)
	reqs := s.Requests()
	require.Len(t, reqs, 2)
	require.Less(t, requestBytes(reqs[1]), 8<<10, "the retry carries an excerpt, not the refused reply")
	require.Contains(t, reqs[1].Messages[2].Content, "bytes left out")
	require.Contains(t, reqs[1].Last(), "could not be used")
	var total int64
	for _, ext := range []string{"json", "md"} {
		files, err := filepath.Glob(filepath.Join(dir, "nodes", "n1", "prompts."+ext+"*"))
		require.NoError(t, err)
		for _, f := range files {
			total += fileSize(t, f)
		}
	}
	require.Less(t, total, int64(3*MaxLoggedReply), "the logs keep an excerpt of the huge reply")
}

// TestCutOffReplyFeedback: a reply cut at the output limit is said to be
// cut off, with its size, rather than an "unexpected EOF".
func TestCutOffReplyFeedback(t *testing.T) {
	t.Parallel()
	s := fakellm.New(t, func(r fakellm.Request) fakellm.Reply {
		if r.Attempt == 1 {
			return fakellm.Reply{Content: good[:len(good)/2], FinishReason: "length", TokensOut: 4096}
		}
		return fakellm.Reply{Content: good}
	})
	_, err := Generate(context.Background(), GenerateParams{Client: fakeClient(t, s), Messages: ask(), Purpose: "draft", Node: "n1"})
	require.NoError(t, err)
	fb := s.Requests()[1].Last()
	require.Contains(t, fb, "was cut off: it reached the output limit (4096 tokens")
	require.Contains(t, fb, "keep the whole reply well under that limit")
}

// TestReasoningSpentFeedback: a reasoning model that spends every
// completion token thinking (the client asks again with a larger limit up
// to the cap first) gets feedback that says so, not advice to write fewer
// files; with no reply at all after the retries, the node's reason says
// what happened.
func TestReasoningSpentFeedback(t *testing.T) {
	t.Parallel()
	spent := func(r fakellm.Request) fakellm.Reply {
		return fakellm.Reply{FinishReason: "length", TokensIn: 900, TokensOut: r.MaxCompletionTokens, ReasoningTokens: r.MaxCompletionTokens}
	}
	s := fakellm.New(t, func(r fakellm.Request) fakellm.Reply {
		if r.Attempt == 1 {
			return spent(r)
		}
		return fakellm.Reply{Content: good, TokensIn: 900, TokensOut: 300}
	})
	c, err := llm.NewOpenAI(llm.OpenAIOptions{BaseURL: s.BaseURL(), Model: "gpt-5.2", MaxTokensCap: 4096, Logger: testutil.Logger(t)})
	require.NoError(t, err)
	client := llm.Defaults{Client: c, MaxTokens: 2048, ReasoningEffort: "low"}
	_, err = Generate(context.Background(), GenerateParams{Client: client, Messages: ask(), Purpose: "draft", Node: "n1"})
	require.NoError(t, err)
	reqs := s.Requests()
	require.Len(t, reqs, 4, "2048, then 4096 (the cap), then effort minimal; then the conversation goes on")
	require.Equal(t, []int{2048, 4096, 4096}, []int{reqs[0].MaxCompletionTokens, reqs[1].MaxCompletionTokens, reqs[2].MaxCompletionTokens})
	require.Equal(t, "minimal", reqs[2].ReasoningEffort)
	fb := reqs[3].Last()
	require.Contains(t, fb, "all of its output limit went to reasoning")
	require.Contains(t, fb, "the model spent all 2048 completion tokens on reasoning; asked again with max_completion_tokens 4096")
	require.NotContains(t, fb, "fewer and shorter files")

	never := fakellm.New(t, spent)
	c, err = llm.NewOpenAI(llm.OpenAIOptions{BaseURL: never.BaseURL(), Model: "gpt-5.2", Logger: testutil.Logger(t)})
	require.NoError(t, err)
	_, err = Generate(context.Background(), GenerateParams{Client: llm.Defaults{Client: c, MaxTokens: 8192}, Messages: ask(), Purpose: "draft", Node: "n1", Retries: 1})
	require.ErrorIs(t, err, ErrUnusable)
	require.ErrorContains(t, err, "the model spent its completion tokens on reasoning and wrote nothing")
}

// TestFileModes: the unambiguous ways models write a mode are accepted and
// normalised; the rest are refused with the reason.
func TestFileModes(t *testing.T) {
	t.Parallel()
	payload := func(mode string) string {
		return `{"phase_artifacts": {"coding": {"workspace": {"files": [{"path": "run.sh", "content": "#!/bin/sh\n", "mode": ` + mode + `}]}}, "run": {"commands": ["./run.sh"]}}}`
	}
	for mode, want := range map[string]schema.FileMode{
		`420`: "0644", `493`: "0755", `644`: "0644", `755`: "0755",
		`"644"`: "0644", `"0644"`: "0644", `"755"`: "0755", `"0755"`: "0755", `null`: "",
	} {
		a, err := ParseArtifacts(payload(mode))
		require.NoError(t, err, mode)
		require.Equal(t, want, a.Phases.Coding.Workspace.Files[0].Mode, mode)
	}
	for mode, why := range map[string]string{
		`511`: `"511": only regular files`, `"0777"`: `"0777": only regular files`, `"4755"`: `"4755"`,
		`true`: "file mode true", `6.44`: `"6.44"`, `"rwxr-xr-x"`: `"rwxr-xr-x"`,
	} {
		_, err := ParseArtifacts(payload(mode))
		require.ErrorIs(t, err, ErrArtifacts, mode)
		require.ErrorContains(t, err, why, mode)
	}
}

func TestExcerpt(t *testing.T) {
	t.Parallel()
	require.Equal(t, "short", Excerpt("short", 10))
	long := strings.Repeat("é", 1000) // 2 bytes each
	e := Excerpt(long, 100)
	require.Less(t, len(e), 200)
	require.Contains(t, e, "bytes left out")
	require.True(t, strings.HasPrefix(e, "éé"))
	require.True(t, strings.HasSuffix(e, "éé"))
	require.NotContains(t, e, "\uFFFD")
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}
