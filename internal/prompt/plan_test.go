package prompt

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParsePlan(t *testing.T) {
	t.Parallel()
	p, err := ParsePlan("```json\n{\"plan\": {\"goal\": \"fast stencil\", \"approach\": \"OpenMP rows\", \"risks\": [\"NUMA\"], \"extra\": 1}}\n```")
	require.NoError(t, err)
	require.Equal(t, "fast stencil", p.Goal)
	require.Equal(t, []string{"NUMA"}, p.Risks)
	require.Contains(t, string(p.Raw), `"extra": 1`, "the whole plan is kept")
	for in, want := range map[string]string{
		``:                                  "not one JSON object",
		`{"plan": "x"}`:                     `no "plan" object`,
		`{"goal": "x"}`:                     `no "plan" object`,
		`{"plan": {}}`:                      "neither a goal nor an approach",
		`{"plan": {"goal": "a"}} extra`:     "text after",
		`{"plan": {"goal": 3}}`:             "plan:",
		strings.Repeat(" ", MaxPlanBytes+1): "bytes",
	} {
		_, err := ParsePlan(in)
		require.ErrorIs(t, err, ErrPlan, in)
		require.ErrorContains(t, err, want, in)
	}
}

func FuzzParsePlan(f *testing.F) {
	f.Add(`{"plan": {"goal": "g", "approach": "a"}}`)
	f.Add("```\n{\"plan\": {\"approach\": \"x\"}}\n```")
	f.Add(`{"plan": [1]}`)
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePlan(s)
		if err != nil {
			return
		}
		require.True(t, json.Valid(p.Raw))
		require.NotEmpty(t, strings.TrimSpace(p.Goal+p.Approach))
	})
}
