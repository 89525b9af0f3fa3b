package engine

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// TestCodeBlock: a file that holds a fence of its own (generated code
// often quotes markdown) cannot end its block early: the fence is longer
// than any run of backticks in it.
func TestCodeBlock(t *testing.T) {
	for content, fence := range map[string]string{
		"int main(){}":                    "```",
		"a ``` b":                         "````",
		"```sh\nmake\n```":                "````",
		"x ````` y `` z":                  "``````",
		"ends with a backtick `":          "```",
		"":                                "```",
		"two\n````\nfences ``` inside it": "`````",
	} {
		got := codeBlock("c", content)
		require.Equal(t, fence+"c\n"+content+"\n"+fence+"\n\n", got, content)
		lines := strings.Split(strings.TrimSuffix(got, "\n\n"), "\n")
		for _, l := range lines[1 : len(lines)-1] {
			require.False(t, strings.HasPrefix(strings.TrimSpace(l), fence), "a line of the content closes the block: %q", l)
		}
	}
}

// TestCutText: archived text over its bound keeps its head, cut between
// runes, and says how much it was.
func TestCutText(t *testing.T) {
	if got := cutText("short", 100); got != "short" {
		t.Fatalf("text within the bound changed: %q", got)
	}
	text := strings.Repeat("é", 200) // 400 bytes
	got := cutText(text, 100)
	if len(got) > 100 || !utf8.ValidString(got) || !strings.HasSuffix(got, "[... cut to 100 of 400 chars ...]") {
		t.Fatalf("cut: %d bytes, valid %v: %q", len(got), utf8.ValidString(got), got)
	}
	if got := cutText(text, 5); !strings.HasPrefix(got, "\n[... cut to 5 of 400") {
		t.Fatalf("a bound smaller than the marker keeps no text: %q", got)
	}
}
