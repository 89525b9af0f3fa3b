package prompt

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseEvaluationReplies(t *testing.T) {
	t.Parallel()
	r, err := ParseReview("```json\n{\"is_bug\": true, \"summary\": \"the checksum is NaN\", \"metric_plausible\": false}\n```")
	require.NoError(t, err)
	require.True(t, r.IsBug)
	require.Equal(t, "the checksum is NaN", r.Summary)
	for _, bad := range []string{`{"summary": "x"}`, `{"is_bug": false, "summary": ""}`, `{"is_bug": false, "summary": "x", "extra": 1}`, `{"is_bug": 1, "summary": "x"}`, `not json`, `{"is_bug": false, "summary": "x"} {}`} {
		_, err := ParseReview(bad)
		require.ErrorIs(t, err, ErrEvaluation, bad)
	}
	ms, err := ParseMetricsReply(`{"metrics": [{"name": "gflops", "value": 12.5, "unit": "GFLOP/s"}, {"name": "time_s", "value": 0.2}]}`)
	require.NoError(t, err)
	require.Equal(t, []ParsedMetric{{"gflops", 12.5, "GFLOP/s"}, {"time_s", 0.2, ""}}, ms)
	for _, bad := range []string{`{"metrics": [{"name": "a b", "value": 1}]}`, `{"metrics": [{"name": "x"}]}`, `{"metrics": [{"name": "x", "value": "1"}]}`,
		`{"metrics": [{"name": "x", "value": 1}, {"name": "x", "value": 2}]}`, `{"metrics": [{"name": "x", "value": 1e999}]}`} {
		_, err := ParseMetricsReply(bad)
		require.ErrorIs(t, err, ErrEvaluation, bad)
	}
}

func FuzzParseEvaluationReplies(f *testing.F) {
	for _, s := range []string{`{"is_bug": true, "summary": "x"}`, `{"metrics": [{"name": "g", "value": 1}]}`, `{"summary": "s"}`, "```json\n{}\n```", `[]`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, payload string) {
		if r, err := ParseReview(payload); err == nil && r.Summary == "" {
			t.Fatal("a review without a summary")
		} else if err != nil && !errors.Is(err, ErrEvaluation) {
			t.Fatalf("unclassified error %v", err)
		}
		if ms, err := ParseMetricsReply(payload); err == nil {
			for _, m := range ms {
				if m.Name == "" {
					t.Fatal("a metric without a name")
				}
			}
		} else if !errors.Is(err, ErrEvaluation) {
			t.Fatalf("unclassified error %v", err)
		}
	})
}
