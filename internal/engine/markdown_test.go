package engine

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/schema"
)

// TestCodeBlock: a file that holds a fence of its own (generated code
// often quotes markdown) cannot end its block early: the fence is longer
// than any run of backticks in it.
func TestCodeBlock(t *testing.T) {
	t.Parallel()
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

// TestEnvironmentText: the report says what the best node ran in: its
// image, the layers it inherited, the one it left and what it holds.
func TestEnvironmentText(t *testing.T) {
	t.Parallel()
	require.Empty(t, environmentText(nil), "no image: the worker's own system")
	got := environmentText(&schema.ContainerUsed{Image: "store:sha256:" + strings.Repeat("a", 64), Kind: "oci", Digest: "sha256:" + strings.Repeat("b", 64),
		Runtime: "hpcq", Layers: []string{"sha256:" + strings.Repeat("c", 64), "sha256:" + strings.Repeat("d", 64)}, Layer: "sha256:" + strings.Repeat("e", 64),
		LayerBytes: 3 << 20, LayerHolds: "Debian packages: libopenblas-dev"})
	require.Equal(t, "### Its environment\n\nThe image `store:sha256:"+strings.Repeat("a", 64)+"` (oci, sha256:bbbbbbbbbbbb), run by hpcq, over the 2 layers its "+
		"ancestors' commands left (`sha256:cccccccccccc`, `sha256:dddddddddddd`, the oldest first). It left a layer of its own, `sha256:eeeeeeeeeeee` "+
		"(3.0 MiB): Debian packages: libopenblas-dev.\n\n", got)
}
