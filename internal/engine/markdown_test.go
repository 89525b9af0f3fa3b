package engine

import (
	"strings"
	"testing"

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
