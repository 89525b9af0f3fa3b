package memory_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/memory/sqlite"
)

func newMemory(t *testing.T, cfg memory.Config, opts memory.Options) *memory.Memory {
	t.Helper()
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "memory.sqlite"), sqlite.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	if opts.Logger == nil {
		opts.Logger = testutil.Logger(t)
	}
	m := memory.New(s, cfg, opts)
	_, err = m.Fork(context.Background(), "root", "")
	require.NoError(t, err)
	return m
}

func TestParseReplyBothSpellings(t *testing.T) {
	for _, body := range []string{
		`{"core": {"flags": "-O3", "tile": {"value": 32, "importance": 5, "ttl_s": 60}}, "archival": [{"text": "tiling helps", "tags": ["insight"]}],
		  "core_get": ["flags"], "archival_search": {"query": "tiling", "k": 3}, "recall_search": "compile", "core_delete": ["old"]}`,
		`{"mem_core_set": {"flags": "-O3", "tile": {"value": 32, "importance": 5, "ttl_s": 60}}, "mem_archival_write": [{"text": "tiling helps", "tags": ["insight"]}],
		  "mem_core_get": ["flags"], "mem_archival_search": {"query": "tiling", "k": 3}, "mem_recall_search": {"query": "compile"}, "mem_core_delete": "old"}`,
	} {
		u, payload, err := memory.ParseReply("\n <memory_update>"+body+"</memory_update>\n{\"plan\": 1}", true)
		require.NoError(t, err)
		require.Equal(t, `{"plan": 1}`, payload)
		require.Equal(t, []memory.CoreWrite{{Key: "flags", Value: "-O3"}, {Key: "tile", Value: "32", Importance: 5, TTL: 60e9}}, u.CoreSets)
		require.Equal(t, []memory.ArchivalWrite{{Text: "tiling helps", Tags: []string{"insight"}}}, u.Archival)
		require.Equal(t, []string{"flags"}, u.CoreGets)
		require.Equal(t, []string{"old"}, u.CoreDeletes)
		require.Equal(t, &memory.SearchOp{Query: "tiling", K: 3}, u.ArchivalSearch)
		require.Equal(t, "compile", u.RecallSearch.Query)
		require.True(t, u.HasReads())
	}
}

func TestParseReplyErrors(t *testing.T) {
	u, payload, err := memory.ParseReply(`{"plan": 1}`, false)
	require.NoError(t, err)
	require.Nil(t, u)
	require.Equal(t, `{"plan": 1}`, payload)
	_, _, err = memory.ParseReply(`{"plan": 1}`, true)
	require.ErrorIs(t, err, memory.ErrMissingUpdate)

	cases := map[string]struct {
		reply string
		err   error
		want  string
	}{
		"unclosed":   {`<memory_update>{"core": {}}`, memory.ErrBadUpdate, "no closing"},
		"not json":   {`<memory_update>{core: 1}</memory_update>`, memory.ErrBadUpdate, "not a JSON object"},
		"array":      {`<memory_update>[]</memory_update>`, memory.ErrBadUpdate, "not a JSON object"},
		"unknown op": {`<memory_update>{"core_set_all": {}}</memory_update>`, memory.ErrBadUpdate, "core_set_all: unknown op"},
		"twice":      {`<memory_update>{"core": {"a": "1"}, "mem_core_set": {"b": "2"}}</memory_update>`, memory.ErrBadUpdate, "given twice"},
		"core type":  {`<memory_update>{"core": ["a"]}</memory_update>`, memory.ErrBadUpdate, "core: must be an object"},
		"null value": {`<memory_update>{"core": {"a": null}}</memory_update>`, memory.ErrBadUpdate, "use core_delete"},
		"importance": {`<memory_update>{"core": {"a": {"value": "x", "importance": 7}}}</memory_update>`, memory.ErrBadUpdate, "importance 7"},
		"archival":   {`<memory_update>{"archival": [{"txt": "x"}]}</memory_update>`, memory.ErrBadUpdate, "archival: item 0"},
		"empty text": {`<memory_update>{"mem_archival_write": [{"text": " "}]}</memory_update>`, memory.ErrBadUpdate, "empty text"},
		"search k":   {`<memory_update>{"archival_search": {"query": "x", "k": 500}}</memory_update>`, memory.ErrBadUpdate, "k 500"},
		"empty key":  {`<memory_update>{"core_get": [""]}</memory_update>`, memory.ErrBadUpdate, "empty key"},
		"big value":  {`<memory_update>{"core": {"a": "` + strings.Repeat("x", memory.MaxCoreValueLen+1) + `"}}</memory_update>`, memory.ErrOversized, `key "a": value of`},
		"big block":  {`<memory_update>` + strings.Repeat(" ", memory.MaxUpdateBytes+1) + `</memory_update>`, memory.ErrOversized, "block of"},
		"trailing":   {`<memory_update>{"core": {}} {}</memory_update>`, memory.ErrBadUpdate, "text after"},
	}
	for name, c := range cases {
		_, _, err := memory.ParseReply(c.reply, true)
		require.ErrorIs(t, err, c.err, name)
		require.ErrorContains(t, err, c.want, name)
	}
}

func TestApplyIsAtomic(t *testing.T) {
	ctx := context.Background()
	m := newMemory(t, memory.Config{}, memory.Options{})
	err := m.Store().Apply(ctx, memory.ApplyParams{Branch: "root",
		CoreSets: []memory.CoreSetParams{{Key: "a", Value: "1"}, {Key: "b", Value: "2", Importance: 9}},
		Archival: []memory.ArchivalWriteParams{{Text: "should not land"}}})
	require.ErrorIs(t, err, memory.ErrInvalid)
	_, ok, err := m.CoreGet(ctx, "root", "a")
	require.NoError(t, err)
	require.False(t, ok, "nothing of a rejected batch is applied")
	hits, err := m.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: "root", Query: "land"})
	require.NoError(t, err)
	require.Empty(t, hits)
}

func TestConverseReadRounds(t *testing.T) {
	ctx := context.Background()
	var calls bytes.Buffer
	m := newMemory(t, memory.Config{MaxMemoryReadRounds: 2}, memory.Options{Calls: &calls})
	_, _, err := m.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: "root", Text: "tile size 32 beats 64 on this CPU", Tags: []string{"insight"}})
	require.NoError(t, err)

	first := `<memory_update>{"core": {"stage": "improve"}, "archival_search": {"query": "tile size"}, "core_get": ["stage", "missing"]}</memory_update>`
	var seen []string
	payload, err := m.Converse(ctx, "root", first, true, func(ctx context.Context, results string) (string, error) {
		seen = append(seen, results)
		return `<memory_update>{"archival": [{"text": "use tile 32"}]}</memory_update>{"phase_artifacts": {}}`, nil
	})
	require.NoError(t, err)
	require.Equal(t, `{"phase_artifacts": {}}`, payload)
	require.Len(t, seen, 1)
	require.True(t, strings.HasPrefix(seen[0], "<memory_results>\n"))
	var r memory.Results
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSuffix(strings.TrimPrefix(seen[0], "<memory_results>\n"), "\n</memory_results>")), &r))
	require.Equal(t, "improve", *r.Core["stage"], "the block's own writes are visible to its reads")
	require.Nil(t, r.Core["missing"])
	require.Equal(t, "tile size 32 beats 64 on this CPU", r.ArchivalSearch[0].Text)
	hits, err := m.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: "root", Query: "tile"})
	require.NoError(t, err)
	require.Len(t, hits, 2)

	// A model that keeps asking is cut off after max_memory_read_rounds.
	asking := `<memory_update>{"core_get": ["stage"]}</memory_update>{}`
	n := 0
	_, err = m.Converse(ctx, "root", asking, true, func(context.Context, string) (string, error) { n++; return asking, nil })
	require.ErrorIs(t, err, memory.ErrReadRounds)
	require.Equal(t, 2, n)

	_, err = m.Converse(ctx, "root", `{"no": "block"}`, true, nil)
	require.ErrorIs(t, err, memory.ErrMissingUpdate)

	ops := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(calls.String()), "\n") {
		var c struct{ Op, Branch string }
		require.NoError(t, json.Unmarshal([]byte(line), &c))
		require.Equal(t, "root", c.Branch)
		ops[c.Op]++
	}
	for _, op := range []string{"archival_write", "memory_update_writes", "core_get", "archival_search"} {
		require.Positive(t, ops[op], op)
	}
}

type foldDouble struct {
	fail  bool
	calls int
}

func (f *foldDouble) Summarize(_ context.Context, summary string, ev memory.RecallEvent) (string, error) {
	f.calls++
	if f.fail {
		return "", errors.New("llm unavailable")
	}
	return strings.TrimSpace(summary + " " + ev.Payload), nil
}

func TestRecallFoldAndFallback(t *testing.T) {
	ctx := context.Background()
	sum := &foldDouble{}
	m := newMemory(t, memory.Config{RecallMaxEvents: 3}, memory.Options{Summarizer: sum})
	for i := range 5 {
		_, err := m.RecallAppend(ctx, "root", memory.RecallEvent{Kind: "node_result", Payload: fmt.Sprintf("e%d", i)})
		require.NoError(t, err)
	}
	s, window, err := m.RecallWindow(ctx, "root")
	require.NoError(t, err)
	require.Equal(t, "e0 e1", s.Text)
	require.Len(t, window, 3)
	require.Equal(t, "e2", window[0].Payload)

	// A child inherits the summary of its fork and folds on its own.
	_, err = m.Fork(ctx, "child", "root")
	require.NoError(t, err)
	_, err = m.RecallAppend(ctx, "child", memory.RecallEvent{Kind: "node_result", Payload: "c0"})
	require.NoError(t, err)
	s, _, err = m.RecallWindow(ctx, "child")
	require.NoError(t, err)
	require.Equal(t, "e0 e1 e2", s.Text)
	s, _, err = m.RecallWindow(ctx, "root")
	require.NoError(t, err)
	require.Equal(t, "e0 e1", s.Text, "the child's fold does not reach the parent")

	// The summarizer fails: nothing changes, the event stays unfolded.
	sum.fail = true
	_, err = m.RecallAppend(ctx, "root", memory.RecallEvent{Kind: "node_result", Payload: "e5"})
	require.NoError(t, err)
	s, _, err = m.RecallWindow(ctx, "root")
	require.NoError(t, err)
	require.Equal(t, "e0 e1", s.Text)
	sum.fail = false
	_, err = m.RecallAppend(ctx, "root", memory.RecallEvent{Kind: "node_result", Payload: "e6"})
	require.NoError(t, err)
	s, _, err = m.RecallWindow(ctx, "root")
	require.NoError(t, err)
	require.Equal(t, "e0 e1 e2 e3", s.Text, "the backlog is folded once the summarizer is back")
}

func TestSecretsRedactedBeforeStorage(t *testing.T) {
	ctx := context.Background()
	m := newMemory(t, memory.Config{}, memory.Options{}) // redaction is on by default
	_, err := m.CoreSet(ctx, memory.CoreSetParams{Branch: "root", Key: "env", Value: "OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwx"})
	require.NoError(t, err)
	e, _, err := m.CoreGet(ctx, "root", "env")
	require.NoError(t, err)
	require.Equal(t, "OPENAI_API_KEY=[REDACTED]", e.Value)
	_, err = m.Converse(ctx, "root", `<memory_update>{"archival": [{"text": "login with password=hunter2 worked"}]}</memory_update>`, true, nil)
	require.NoError(t, err)
	hits, err := m.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: "root", Query: "login"})
	require.NoError(t, err)
	require.Equal(t, "login with password=[REDACTED] worked", hits[0].Text)
	ev, err := m.RecallAppend(ctx, "root", memory.RecallEvent{Kind: "run_failed", Payload: "Authorization: Bearer abcdefghijklmnop"})
	require.NoError(t, err)
	require.Equal(t, "Authorization: Bearer [REDACTED]", ev.Payload)
}

// FuzzParseReply: no reply panics the parser; errors are typed; whatever
// parses respects the limits.
func FuzzParseReply(f *testing.F) {
	for _, s := range []string{
		`<memory_update>{"core": {"a": "b"}}</memory_update>rest`,
		`<memory_update>{"mem_core_set": {"a": {"value": [1,2], "importance": 2}}, "archival": {"text": "x"}}</memory_update>`,
		`<memory_update>{"archival_search": "q", "recall_search": {"query": "r", "k": 2}}</memory_update>`,
		`<memory_update></memory_update>`, `<memory_update>{"core": {"": "x"}}</memory_update>`, `plain reply`,
		`<memory_update>{"core": {"a": "\u0000"}}</memory_update>`, `<memory_update>{"core_get": "k"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, reply string) {
		u, _, err := memory.ParseReply(reply, true)
		if err != nil {
			if !errors.Is(err, memory.ErrBadUpdate) && !errors.Is(err, memory.ErrOversized) && !errors.Is(err, memory.ErrMissingUpdate) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		for _, c := range u.CoreSets {
			if c.Key == "" || len(c.Key) > memory.MaxKeyLen || len(c.Value) > memory.MaxCoreValueLen || c.Importance < 0 || c.Importance > 5 {
				t.Fatalf("accepted bad core write %+v", c)
			}
		}
		for _, a := range u.Archival {
			if strings.TrimSpace(a.Text) == "" || len(a.Text) > memory.MaxArchivalLen {
				t.Fatalf("accepted bad archival write")
			}
		}
	})
}

func TestRedactionCanBeTurnedOff(t *testing.T) {
	ctx := context.Background()
	m := newMemory(t, memory.Config{RedactSecrets: memory.Bool(false)}, memory.Options{})
	_, err := m.CoreSet(ctx, memory.CoreSetParams{Branch: "root", Key: "k", Value: "password=hunter2"})
	require.NoError(t, err)
	e, _, err := m.CoreGet(ctx, "root", "k")
	require.NoError(t, err)
	require.Equal(t, "password=hunter2", e.Value)
}
