package bridge

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseJobs(t *testing.T) {
	jobs, err := parseJobs("12|RUNNING|hpcq-cpu|hpcq-bridge:hpcq\n13|PENDING|hpcq-gpu|a|comment with | bars\n\n")
	require.NoError(t, err)
	require.Equal(t, []Job{{ID: "12", State: "RUNNING", Name: "hpcq-cpu", Comment: "hpcq-bridge:hpcq"},
		{ID: "13", State: "PENDING", Name: "hpcq-gpu", Comment: "a|comment with | bars"}}, jobs)
	require.True(t, jobs[1].Pending())
	_, err = parseJobs("slurm_load_jobs error: Invalid user\n")
	require.ErrorIs(t, err, ErrSlurm)
}

func FuzzParseJobs(f *testing.F) {
	f.Add("12|RUNNING|hpcq-cpu|hpcq-bridge:hpcq\n")
	f.Add("|||\n")
	f.Add("x")
	f.Fuzz(func(t *testing.T, out string) {
		jobs, err := parseJobs(out)
		if err != nil {
			return
		}
		for _, j := range jobs {
			require.NotEmpty(t, j.ID)
			require.False(t, strings.ContainsAny(j.ID, "\n"))
		}
	})
}
