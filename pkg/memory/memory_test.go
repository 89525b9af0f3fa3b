package memory_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/memory"
)

func TestParseReplyBothSpellings(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
		"nul key":    {`<memory_update>{"core": {"a\u0000b": "x"}}</memory_update>`, memory.ErrBadUpdate, "control or format character (U+0000)"},
		"bidi key":   {`<memory_update>{"core": {"safe\u202eexe": "x"}}</memory_update>`, memory.ErrBadUpdate, "(U+202E)"},
		"newline":    {`<memory_update>{"core_delete": ["a\nb"]}</memory_update>`, memory.ErrBadUpdate, "(U+000A)"},
	}
	for name, c := range cases {
		_, _, err := memory.ParseReply(c.reply, true)
		require.ErrorIs(t, err, c.err, name)
		require.ErrorContains(t, err, c.want, name)
	}
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

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, memory.Config{}.Validate(), "zero values take the defaults")
	require.NoError(t, memory.Defaults().Validate())
	for _, tc := range []struct {
		cfg  memory.Config
		want string
	}{
		{memory.Config{CoreMaxChars: -1}, "core_max_chars is -1"},
		{memory.Config{RetrievalK: -8}, "retrieval_k is -8"},
		{memory.Config{MemoryBudgetChars: 300}, "memory_budget_chars is 300, must be at least 400"},
		{memory.Config{SectionBudgets: map[string]int{"idea_sumary": 10}}, `unknown section_budgets key "idea_sumary"`},
		{memory.Config{SectionBudgets: map[string]int{"results": -1}}, "section_budgets.results is -1"},
		{memory.Config{UseFTS: "false"}, "use_fts: false"},
		{memory.Config{UseFTS: "yes"}, `use_fts is "yes"`},
	} {
		err := tc.cfg.Validate()
		require.Error(t, err)
		require.Contains(t, err.Error(), tc.want)
	}
	for _, v := range []string{"", "auto", "true"} {
		require.NoError(t, memory.Config{UseFTS: v}.Validate())
	}
}
