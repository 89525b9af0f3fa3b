package prompt

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/memory"
)

func full() Context {
	return Context{Idea: "2-D Jacobi stencil with OpenMP; maximize GFLOP/s", Domain: "memory-bound stencils",
		Environment: "gcc 12.2.0 with OpenMP, Open MPI 4.1.4; 32 cores", Resources: "no datasets", Phase0Plan: "tile the grid",
		History: "run 1: 5.8 GFLOP/s", Code: "int main(){}", BaseCode: "int main(){ /* best */ }", Change: "block size 64",
		ExecutionOutput: "stencil.c:3: error: expected ';'", Plots: "scaling.svg: <svg></svg>", Memory: "## Core\nIDEA_SUMMARY: stencil"}
}

// TestBuildEveryKind: every kind renders in both variants; the with-memory
// variant carries the memory and its instructions, the plain one neither.
func TestBuildEveryKind(t *testing.T) {
	t.Parallel()
	for _, kind := range Kinds {
		for _, withMemory := range []bool{false, true} {
			c := full()
			c.WithMemory = withMemory
			msgs, err := Build(kind, c)
			require.NoError(t, err, kind)
			require.Len(t, msgs, 2)
			require.Equal(t, "system", msgs[0].Role)
			user := msgs[1].Content
			require.True(t, strings.HasPrefix(user, "# Introduction\n\n"), kind)
			require.NotContains(t, user, "<no value>")
			if withMemory {
				require.Contains(t, user, "# Memory\n\n## Core\nIDEA_SUMMARY: stencil", kind)
				require.Contains(t, user, "MUST start with a <memory_update> block", kind)
			} else {
				require.NotContains(t, user, "# Memory")
				require.NotContains(t, user, "memory_update", kind)
			}
			if nodeKinds[kind] {
				require.Contains(t, user, `{"phase_artifacts": {`, kind)
				require.Contains(t, user, "# Environment\n\ngcc 12.2.0", kind)
			}
		}
	}
}

func TestBuildSectionsAndOrder(t *testing.T) {
	t.Parallel()
	msgs, err := Build(Debug, Context{Idea: "idea", Code: "CODE", ExecutionOutput: "OUTPUT", Environment: "ENV"})
	require.NoError(t, err)
	u := msgs[1].Content
	order := []string{"# Introduction", "# Research idea", "# Code", "# Execution output", "# Instructions", "# Environment"}
	last := -1
	for _, h := range order {
		i := strings.Index(u, h)
		require.Greater(t, i, last, h)
		last = i
	}
	require.NotContains(t, u, "# Domain", "empty sections are left out")
	require.NotContains(t, u, "# Base code")
	msgs, err = Build(Hyperparam, Context{BaseCode: "BEST", Change: "tile 64", System: "custom system"})
	require.NoError(t, err)
	require.Equal(t, "custom system", msgs[0].Content)
	require.Contains(t, msgs[1].Content, "# Base code\n\nBEST")
	require.Contains(t, msgs[1].Content, "# Hyperparam idea\n\ntile 64")
	msgs, err = Build(Draft, Context{Idea: "x", WithMemory: true})
	require.NoError(t, err)
	require.Contains(t, msgs[1].Content, "(the memory of this branch is empty)")
}

func TestBuildRequires(t *testing.T) {
	t.Parallel()
	for kind, c := range map[Kind]Context{
		Draft: {}, Debug: {Code: "x"}, Improve: {Idea: "x"}, Hyperparam: {BaseCode: "x"}, Ablation: {Change: "x"},
		ExecutionReview: {Code: "x"}, ParseMetrics: {}, Phase0: {Code: "x"}, Summary: {},
	} {
		_, err := Build(kind, c)
		require.ErrorIs(t, err, ErrPrompt, kind)
		require.ErrorContains(t, err, "needs", kind)
	}
	_, err := Build("poem", full())
	require.ErrorContains(t, err, `unknown kind "poem"`)
}

// TestMemoryExampleParses: the <memory_update> example the with-memory
// prompts show is one the protocol accepts.
func TestMemoryExampleParses(t *testing.T) {
	t.Parallel()
	msgs, err := Build(Draft, Context{Idea: "x", WithMemory: true})
	require.NoError(t, err)
	u := msgs[1].Content
	i := strings.Index(u, "<memory_update>\n{") // the example, not the mentions
	j := strings.Index(u, "</memory_update>")
	require.True(t, i >= 0 && j > i)
	upd, payload, err := memory.ParseReply(u[i:j+len("</memory_update>")]+`{"phase_artifacts": {}}`, true)
	require.NoError(t, err)
	require.NotNil(t, upd)
	require.Equal(t, `{"phase_artifacts": {}}`, strings.TrimSpace(payload))
	require.Contains(t, u, "# Memory\n\n(the memory of this branch is empty)\n\n# Memory operations")
}

var update = flag.Bool("update", false, "write testdata/build.golden from the prompts Build makes now")

// TestBuildGolden: the prompts of every kind, in both variants, for a
// full context and for one whose sections carry surrounding blank space,
// are exactly testdata/build.golden (after a deliberate change to the
// prompts: go test ./internal/prompt -run BuildGolden -update, and read the diff).
func TestBuildGolden(t *testing.T) {
	t.Parallel()
	spaced := full()
	spaced.Code = "\n\n  int main(){}  \n\n"
	spaced.Memory = "  \n"
	spaced.Phase0Plan = "tile the grid\n\n\n"
	spaced.TimeFeedback = " \t "
	var b strings.Builder
	for ci, c := range []Context{full(), spaced} {
		for _, kind := range Kinds {
			for _, withMemory := range []bool{false, true} {
				c.WithMemory = withMemory
				msgs, err := Build(kind, c)
				require.NoError(t, err, kind)
				for _, m := range msgs {
					fmt.Fprintf(&b, "==== context %d, %s, memory %v, %s (%d bytes)\n%s\n", ci, kind, withMemory, m.Role, len(m.Content), m.Content)
				}
			}
		}
	}
	path := filepath.Join("testdata", "build.golden")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), b.String())
}
