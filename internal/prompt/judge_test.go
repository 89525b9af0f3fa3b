package prompt

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestJudge(t *testing.T) {
	t.Parallel()
	cands := []Candidate{{ID: "n1", Metric: 10, Summary: "fast but wrong checksum"}, {ID: "n2", Metric: 8, Summary: "correct"}}
	c, prompts := fakeModel(t, `{"best": "n2", "reason": "n1's checksum is wrong"}`)
	best, why := Judge(context.Background(), c, "stencil", "gflops", true, cands)
	require.Equal(t, "n2", best)
	require.Equal(t, "n1's checksum is wrong", why)
	require.Contains(t, (*prompts)[0], "## n1: gflops = 10\n\nfast but wrong checksum")
	require.Contains(t, (*prompts)[0], "higher is better")

	bad, _ := fakeModel(t, `{"best": "n9"}`)
	best, why = Judge(context.Background(), bad, "stencil", "gflops", true, cands)
	require.Equal(t, "n1", best, "the metric decides")
	require.Contains(t, why, `"n9" is not one of the candidates n1, n2`)
	best, _ = Judge(context.Background(), bad, "stencil", "time_s", false, cands)
	require.Equal(t, "n2", best, "minimized")
	best, why = Judge(context.Background(), bad, "x", "m", true, cands[:1])
	require.Equal(t, "n1", best)
	require.Equal(t, "the only candidate", why)
}

func FuzzParseVerdict(f *testing.F) {
	f.Add(`{"best": "n1", "reason": "r"}`)
	f.Add("```\n{\"best\": \"n2\"}\n```")
	f.Fuzz(func(t *testing.T, reply string) {
		best, _, err := ParseVerdict(reply, []string{"n1", "n2"})
		if err != nil {
			require.ErrorIs(t, err, ErrJudge)
			return
		}
		require.True(t, best == "n1" || best == "n2")
		require.False(t, strings.ContainsAny(best, "\n"))
	})
}
