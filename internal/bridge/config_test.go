package bridge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/stretchr/testify/require"

	slurmfiles "github.com/hpcq/hpcq/deploy/slurm"
)

func TestLoadConfigExample(t *testing.T) {
	c, err := LoadConfig("../../deploy/slurm/bridge.yaml", func(k string) string {
		return map[string]string{"HPCQ_BRIDGE_GPU_MAX_JOBS": "5", "HPCQ_BRIDGE_CPU_PARTITION": "short"}[k]
	})
	require.NoError(t, err)
	require.Equal(t, []string{"cpu", "gpu", "mpi"}, c.Pools())
	require.Equal(t, 4, c.Queues["mpi"].Nodes)
	require.Equal(t, 1, c.Queues["mpi"].Slots, "a multi-node worker runs one task: it takes the allocation")
	require.Equal(t, 5, c.Queues["gpu"].MaxJobs, "env overrides the file")
	require.Equal(t, "short", c.Queues["cpu"].Partition)
	require.Equal(t, 5*time.Minute, c.Queues["cpu"].SignalGrace)
	require.Equal(t, 60*time.Second, c.Queues["gpu"].SignalGrace, "default")
	require.Equal(t, 1, c.Queues["gpu"].Backlog, "default")
	require.True(t, c.Queues["gpu"].Exclusive)
	require.False(t, c.Queues["cpu"].Exclusive)
}

// TestMultiNodeScript: a queue of several nodes asks for them with one
// task a CPU on each (MPI's slots), a queue of one for its CPUs per task.
func TestMultiNodeScript(t *testing.T) {
	render := func(s Script) string {
		tmpl := template.Must(template.New("w").Option("missingkey=error").Parse(slurmfiles.WorkerTemplate))
		var b strings.Builder
		require.NoError(t, tmpl.Execute(&b, s))
		return b.String()
	}
	multi := render(Script{JobName: "hpcq-mpi", Pool: "mpi", Nodes: 4, CPUsPerTask: 32, Slots: 1, WorkerBin: "/w"})
	require.Contains(t, multi, "#SBATCH --nodes=4\n#SBATCH --ntasks-per-node=32\n")
	require.NotContains(t, multi, "--cpus-per-task")
	one := render(Script{JobName: "hpcq-cpu", Pool: "cpu", CPUsPerTask: 8, Slots: 2, WorkerBin: "/w"})
	require.Contains(t, one, "#SBATCH --cpus-per-task=8\n")
	require.NotContains(t, one, "--nodes")
	require.NotContains(t, one, "--exclusive")
	require.NotContains(t, one, "HPCQ_WORKER_NODE_EXCLUSIVE")
	// An exclusive queue holds its nodes alone, and its workers say so.
	alone := render(Script{JobName: "hpcq-timing", Pool: "timing", CPUsPerTask: 8, Slots: 2, WorkerBin: "/w", Exclusive: true})
	require.Contains(t, alone, "#SBATCH --exclusive\n")
	require.Regexp(t, `(?m)^export HPCQ_WORKER_NODE_EXCLUSIVE=1\n\n# exec`, alone)
	require.Contains(t, alone, "\nexec /w --pools timing")
}

func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for body, want := range map[string]string{
		"queues: {}\n":                                         "queues: none",
		"queues: {cpu: {partitoin: x}}\n":                      "field partitoin not found",
		"queues: {cpu: {partition: 'a b'}}\n":                  "not a Slurm name",
		"queues: {cpu: {time_limit: 'soon'}}\n":                "time_limit",
		"queues: {cpu: {max_jobs: 2, backlog: 3}}\n":           "more than max_jobs",
		"queues: {cpu: {extra_args: ['-N 2']}}\n":              "one --option=value",
		"queues: {cpu: {time_limit: '1', signal_grace: 2m}}\n": "not shorter than the time limit",
		"name: 'no spaces'\nqueues: {cpu: {}}\n":               "name",
		"queues: {'bad pool!': {}}\n":                          "queues.bad pool!",
	} {
		p := filepath.Join(dir, "b.yaml")
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		_, err := LoadConfig(p, func(string) string { return "" })
		require.ErrorIs(t, err, ErrConfig, body)
		require.ErrorContains(t, err, want, body)
	}
	p := filepath.Join(dir, "b.yaml")
	require.NoError(t, os.WriteFile(p, []byte("queues: {cpu: {}}\n"), 0o644))
	_, err := LoadConfig(p, func(k string) string { return map[string]string{"HPCQ_BRIDGE_CPU_MAX_JOBS": "many"}[k] })
	require.ErrorContains(t, err, "HPCQ_BRIDGE_CPU_MAX_JOBS")
}

func TestParseTimeLimit(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"10": 10 * time.Minute, "05:30": 5*time.Minute + 30*time.Second, "01:00:00": time.Hour,
		"2-00:00:00": 48 * time.Hour, "1-12": 36 * time.Hour,
	} {
		got, ok := ParseTimeLimit(in)
		require.True(t, ok, in)
		require.Equal(t, want, got, in)
	}
	_, ok := ParseTimeLimit("")
	require.False(t, ok)
}

func TestJobsToSubmit(t *testing.T) {
	q := &Queue{Slots: 4, MaxJobs: 3, Backlog: 2}
	for _, c := range []struct {
		backlog, external, pending, running, want int
		why                                       string
	}{
		{0, 0, 0, 0, 0, "nothing waits"},
		{1, 0, 0, 0, 1, "one task needs one job"},
		{20, 0, 0, 0, 2, "20 tasks need 5 jobs: max_jobs 3, at most 2 pending"},
		{20, 0, 2, 0, 0, "two pending already"},
		{20, 0, 1, 1, 1, "3 alive at most"},
		{20, 0, 0, 3, 0, "max_jobs reached"},
		{8, 8, 0, 0, 0, "workers it did not start cover the backlog"},
		{9, 8, 0, 0, 1, "one task uncovered"},
		{4, 0, 0, 1, 0, "the running job covers them"},
	} {
		require.Equal(t, c.want, JobsToSubmit(c.backlog, c.external, q, c.pending, c.running), c.why)
	}
}

// TestBridgeFieldsFromTheEnvironment: a job script sets the bridge's own
// fields without editing a copy of bridge.yaml.
func TestBridgeFieldsFromTheEnvironment(t *testing.T) {
	env := map[string]string{"HPCQ_BRIDGE_WORKER_BIN": "/opt/hpcq/bin/worker", "HPCQ_BRIDGE_LOG_DIR": "/scratch/logs", "HPCQ_BRIDGE_SERVER_GONE_EXIT": "90s"}
	c, err := LoadConfig("../../deploy/slurm/bridge.yaml", func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, "/opt/hpcq/bin/worker", c.WorkerBin)
	require.Equal(t, "/scratch/logs", c.LogDir)
	require.Equal(t, 90*time.Second, c.ServerGoneExit)
	env["HPCQ_BRIDGE_SERVER_GONE_EXIT"] = "soon"
	_, err = LoadConfig("../../deploy/slurm/bridge.yaml", func(k string) string { return env[k] })
	require.ErrorContains(t, err, `HPCQ_BRIDGE_SERVER_GONE_EXIT="soon"`)
}
