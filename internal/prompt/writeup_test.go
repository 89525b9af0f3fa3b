package prompt

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/llm"
)

func TestWriteupMessages(t *testing.T) {
	_, err := WriteupMessages(Paper{Idea: "x"})
	require.ErrorIs(t, err, ErrPrompt)
	msgs, err := WriteupMessages(Paper{Idea: "Fast stencil", Facts: "- `best` = 5.1 GFLOP/s", Bibliography: "- williams2009: Roofline",
		Draft: `\documentclass{article}`, Feedback: "- 41.0: no fact"})
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	u := msgs[1].Content
	require.Contains(t, u, `\fact{id}`)
	order := []string{"# Introduction", "# Research idea", "# Facts", "# Bibliography", "# Previous draft", "# Feedback"}
	last := -1
	for _, h := range order {
		i := strings.Index(u, h)
		require.Greater(t, i, last, h)
		last = i
	}
	require.NotContains(t, u, "# Figures", "an empty section is left out")
	require.NotContains(t, u, "<memory_update>")

	_, err = WriteupReviewMessages(`\documentclass{article}`, nil)
	require.ErrorIs(t, err, ErrPrompt)
	msgs, err = WriteupReviewMessages(`\documentclass{article}`, []llm.Image{{MIME: "image/png", Data: []byte("p1")}, {MIME: "image/png", Data: []byte("p2")}})
	require.NoError(t, err)
	require.Len(t, msgs[1].Images, 2)
	require.Contains(t, msgs[1].Content, "2 pages, attached as images 1 to 2")
	require.Contains(t, msgs[1].Content, "Review the rendered pages")
}

func TestParsePaper(t *testing.T) {
	doc := "\\documentclass{article}\n\\begin{document}\nHi.\n\\end{document}"
	for name, c := range map[string]struct{ reply, want, err string }{
		"fenced":        {"Here it is:\n```latex\n" + doc + "\n```\nDone.", doc + "\n", ""},
		"tex fence":     {"```tex\n" + doc + "\n```", doc + "\n", ""},
		"bare":          {"Sure. " + doc + " trailing words", doc + "\n", ""},
		"second fence":  {"```json\n{}\n```\n```latex\n" + doc + "\n```", doc + "\n", ""},
		"no class":      {"```latex\n\\begin{document}x\\end{document}\n```", "", "no \\documentclass"},
		"not whole":     {"\\documentclass{article}\n\\begin{document}\ncut off", "", "not whole"},
		"end before":    {"\\end{document}\\documentclass{article}\\begin{document}", "", "not whole"},
		"oversized":     {"\\documentclass{article}\\begin{document}" + strings.Repeat("x", MaxPaperBytes) + "\\end{document}", "", "at most"},
		"invalid utf-8": {"\\documentclass{article}\\begin{document}\xff\\end{document}", "\\documentclass{article}\\begin{document}?\\end{document}\n", ""},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ParsePaper(c.reply)
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

func TestParsePageReview(t *testing.T) {
	f, err := ParsePageReview("```json\n{\"findings\": [\"Figure 1's axis has no unit\", \"  \"]}\n```")
	require.NoError(t, err)
	require.Equal(t, []string{"Figure 1's axis has no unit"}, f)
	f, err = ParsePageReview(`{"findings": []}`)
	require.NoError(t, err)
	require.Empty(t, f)
	_, err = ParsePageReview(`{"summary": "fine"}`)
	require.ErrorContains(t, err, `no "findings"`)
	_, err = ParsePageReview(`{"findings": []} and more`)
	require.ErrorContains(t, err, "data after")
	long, err := ParsePageReview(`{"findings": ["` + strings.Repeat("a", 5000) + `"]}`)
	require.NoError(t, err)
	require.Len(t, long[0], MaxFindingBytes+3)
}

// FuzzParsePaper: any reply gives a paper that is a whole document within
// the bound, valid UTF-8, or an error; never a panic.
func FuzzParsePaper(f *testing.F) {
	f.Add("```latex\n\\documentclass{article}\\begin{document}x\\end{document}\n```")
	f.Add("\\end{document}\\documentclass\\begin{document}")
	f.Add("```\n```latex\n\\documentclass```")
	f.Fuzz(func(t *testing.T, reply string) {
		tex, err := ParsePaper(reply)
		if err != nil {
			return
		}
		require.True(t, strings.HasPrefix(tex, `\documentclass`))
		require.True(t, strings.HasSuffix(tex, "\\end{document}\n"))
		require.Contains(t, tex, `\begin{document}`)
		require.LessOrEqual(t, len(tex), MaxPaperBytes+1)
	})
}
