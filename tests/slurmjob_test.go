package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/testutil"
)

// allInOne is a submission of a deploy/slurm script as a user would make
// it: from a directory of their own, the script unchanged.
type allInOne struct {
	e      *slurmEnv
	id     string
	script string // allinone, scheduler
	home   string // HPCQ_HOME: the submit directory, runs/ under it
	local  string // HPCQ_LOCAL_DIR: the node-local disk
}

// submitAllInOne submits the script with its arguments (an idea, or
// --resume and a run directory), the model at llmURL, and sbatch's extra
// options.
func (e *slurmEnv) submitAllInOne(t *testing.T, llmURL string, sbatchOpts []string, scriptArgs ...string) *allInOne {
	t.Helper()
	return e.submitScript(t, "allinone", llmURL, sbatchOpts, scriptArgs...)
}

// submitScript submits deploy/slurm/<name>.sbatch.
func (e *slurmEnv) submitScript(t *testing.T, name, llmURL string, sbatchOpts []string, scriptArgs ...string) *allInOne {
	t.Helper()
	home, local := t.TempDir(), t.TempDir()
	script, err := filepath.Abs("../deploy/slurm/" + name + ".sbatch")
	require.NoError(t, err)
	args := append(append(append([]string{"--parsable"}, sbatchOpts...), script), scriptArgs...)
	cmd := exec.Command("sbatch", args...)
	cmd.Dir = home
	// The jobs start their own servers: the test's is not theirs.
	var env []string
	for _, kv := range e.env {
		if !strings.HasPrefix(kv, "HPCQ_NATS_URL=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "HPCQ_BIN="+binDir, "HPCQ_LOCAL_DIR="+local,
		"OPENAI_BASE_URL="+llmURL, "OPENAI_API_KEY=test-key")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	id := strings.TrimSpace(strings.Split(string(out), ";")[0])
	t.Logf("job %s in %s", id, home)
	return &allInOne{e: e, id: id, script: name, home: home, local: local}
}

// info is the job's scontrol record.
func (j *allInOne) info(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("scontrol", "show", "job", j.id)
	cmd.Env = j.e.env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	return string(out)
}

// wait waits for the job to end; its state and exit code.
func (j *allInOne) wait(t *testing.T, limit time.Duration) (state string, exit int) {
	t.Helper()
	testutil.Eventually(t, limit, "job "+j.id+" to end", func() bool {
		m := regexp.MustCompile(`JobState=(\S+)`).FindStringSubmatch(j.info(t))
		state = m[1]
		return state != "PENDING" && state != "RUNNING" && state != "COMPLETING" && state != "CONFIGURING"
	})
	m := regexp.MustCompile(`ExitCode=(\d+):`).FindStringSubmatch(j.info(t))
	exit, _ = strconv.Atoi(m[1])
	// Slurm may say the job ended (CANCELLED at the time limit's warning
	// signal) while its script still cleans up: its last line is the end.
	testutil.Eventually(t, time.Minute, "job "+j.id+"'s script to say it is done", func() bool {
		data, _ := os.ReadFile(filepath.Join(j.home, "hpcq-"+j.script+"-"+j.id+".out"))
		return strings.Contains(string(data), ": done (status ")
	})
	return state, exit
}

// output is the job's output file.
func (j *allInOne) output(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(j.home, "hpcq-"+j.script+"-"+j.id+".out"))
	require.NoError(t, err)
	return string(data)
}

// completed waits for the job to end and requires that it completed, exit
// 0, its run of two nodes done without a bug; its output.
func (j *allInOne) completed(t *testing.T) string {
	t.Helper()
	state, exit := j.wait(t, 3*time.Minute)
	out := j.output(t)
	t.Logf("job %s:\n%s", j.id, out)
	require.Equal(t, "COMPLETED", state, out)
	require.Zero(t, exit, out)
	require.Contains(t, out, "2 nodes (0 buggy")
	return out
}

// requireNothingLeft: no process of the job runs, and of all it made only
// the run directory and its output file stay.
func (j *allInOne) requireNothingLeft(t *testing.T) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, "every process of job "+j.id+" to end", func() bool {
		return len(jobProcesses(j.id, j.e.conf)) == 0
	})
	left, err := os.ReadDir(j.local)
	require.NoError(t, err)
	require.Empty(t, left, "the job's node-local files (NATS store, credentials, workspaces) are removed")
	home, err := os.ReadDir(j.home)
	require.NoError(t, err)
	for _, d := range home {
		require.Contains(t, []string{"runs", "hpcq-" + j.script + "-" + j.id + ".out"}, d.Name(), "only the run directory and the job's output")
	}
}

// jobProcesses are the pids of processes whose environment says they
// belong to Slurm job id of the Slurm whose configuration is conf (tests
// run Slurms of their own side by side, each numbering its jobs from 1).
func jobProcesses(id, conf string) []string {
	var pids []string
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err != nil {
			continue
		}
		env = append([]byte{0}, env...)
		if bytes.Contains(env, []byte("\x00SLURM_JOB_ID="+id+"\x00")) && bytes.Contains(env, []byte("\x00SLURM_CONF="+conf+"\x00")) {
			pids = append(pids, d.Name())
		}
	}
	return pids
}

// natsURL is the server the job's output says it started.
func natsURL(t *testing.T, out string) string {
	t.Helper()
	m := regexp.MustCompile(`NATS at (nats://\S+) \(this job's own`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	return m[1]
}

// TestAllInOneJobs: two all-in-one jobs on one node at once, each as
// submitted unchanged: each starts its own NATS server (a port of its own,
// credentials of its own) and its run uses only it; both runs complete, the
// workers are drained (no srun kill), the jobs end COMPLETED with exit 0
// and leave their run directories and nothing else.
func TestAllInOneJobs(t *testing.T) {
	t.Parallel()
	e := startSlurm(t)
	srv := draftsLLM(t, func(n int) string { return runScript(fmt.Sprintf("echo \"METRIC score=%d\"\n", n)) })
	idea := writeIdea(t, 2, 2)
	a := e.submitAllInOne(t, srv.BaseURL(), nil, idea)
	b := e.submitAllInOne(t, srv.BaseURL(), nil, idea)
	for _, j := range []*allInOne{a, b} {
		out := j.completed(t)
		require.NotContains(t, out, "forcing job termination")
		require.NotContains(t, out, "Killed")
		require.Contains(t, out, "hpcq-allinone: done (status 0)")
		j.requireNothingLeft(t)
	}
	require.NotEqual(t, natsURL(t, a.output(t)), natsURL(t, b.output(t)), "each job its own server")
}

// TestAllInOneSchedulerFails: a run that cannot start (no run.yaml) fails
// the job with the scheduler's status and its reason, and leaves nothing
// behind (no server, no store, no credentials).
func TestAllInOneSchedulerFails(t *testing.T) {
	t.Parallel()
	e := startSlurm(t)
	j := e.submitAllInOne(t, "http://127.0.0.1:1/v1", nil, t.TempDir())
	state, exit := j.wait(t, 2*time.Minute)
	out := j.output(t)
	require.Equal(t, "FAILED", state, out)
	require.NotZero(t, exit, out)
	require.Contains(t, out, "run.yaml")
	require.Contains(t, out, fmt.Sprintf("hpcq-allinone: done (status %d)", exit))
	testutil.Eventually(t, 30*time.Second, "every process of the job to end", func() bool { return len(jobProcesses(j.id, j.e.conf)) == 0 })
	left, err := os.ReadDir(j.local)
	require.NoError(t, err)
	require.Empty(t, left)
}

// TestAllInOneTimeLimit: a job whose time limit comes while its nodes run
// gets the warning signal (B:TERM, asked for 100 s before a 2-minute limit:
// slurmctld looks every 30 s or so, so it comes 20 to 50 s in, and the job
// has over a minute to stop): the scheduler interrupts the run
// resumably, the workers hand their tasks back, and the job ends by itself
// before the limit, with nothing left; the run then completes with
// --resume.
func TestAllInOneTimeLimit(t *testing.T) {
	t.Parallel()
	e := startSlurm(t)
	srv := draftsLLM(t, func(n int) string {
		return runScript(fmt.Sprintf("[ -n \"${TEST_FAST:-}\" ] || sleep 90\necho \"METRIC score=%d\"\n", n))
	})
	idea := writeIdea(t, 2, 2)
	j := e.submitAllInOne(t, srv.BaseURL(), []string{"--time=2", "--signal=B:TERM@100"}, idea)
	state, _ := j.wait(t, 3*time.Minute)
	out := j.output(t)
	require.NotEqual(t, "TIMEOUT", state, "the job ended at the signal, by itself:\n%s", out)
	t.Logf("job %s:\n%s", j.id, out)
	require.Contains(t, out, "hpcq-allinone: signal: interrupting the run")
	require.Contains(t, out, "resume with --resume "+filepath.Join(j.home, "runs", "allinone-"+j.id))
	script, err := filepath.Abs("../deploy/slurm/allinone.sbatch")
	require.NoError(t, err)
	require.Contains(t, out, "hpcq-allinone: the run stopped at the signal; go on with: sbatch "+script+" --resume "+filepath.Join(j.home, "runs", "allinone-"+j.id),
		"the script as submitted, not Slurm's copy of it")
	j.requireNothingLeft(t)

	// Resumed by another job, as the log says, with tasks that no longer
	// wait (the job's environment reaches them).
	e.env = append(e.env, "TEST_FAST=1")
	runDir := filepath.Join(j.home, "runs", "allinone-"+j.id)
	r := e.submitAllInOne(t, srv.BaseURL(), nil, "--resume", runDir)
	state, exit := r.wait(t, 3*time.Minute)
	res := r.output(t)
	require.Equal(t, "COMPLETED", state, res)
	require.Zero(t, exit, res)
	r.requireNothingLeft(t)
	require.Contains(t, res, "2 nodes (0 buggy")
}

// TestAllInOneTooShort: a job whose walltime cannot hold a task's time
// limits runs nothing, and says so at its end with the reason and the
// remedy (not only in a worker's log).
func TestAllInOneTooShort(t *testing.T) {
	t.Parallel()
	e := startSlurm(t)
	srv := draftsLLM(t, func(n int) string { return runScript(fmt.Sprintf("echo \"METRIC score=%d\"\n", n)) })
	idea := writeIdea(t, 2, 2)
	f, err := os.OpenFile(filepath.Join(idea, "run.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("limits: {compile_timeout_s: 120, run_timeout_s: 300}\n") // the example's: 7 minutes
	require.NoError(t, err)
	require.NoError(t, f.Close())
	j := e.submitAllInOne(t, srv.BaseURL(), []string{"--time=2", "--signal=B:TERM@100"}, idea)
	j.wait(t, 3*time.Minute)
	out := j.output(t)
	t.Logf("job %s:\n%s", j.id, out)
	require.Contains(t, out, "every task was declined: its time limits (7m0s) do not fit in the ")
	require.Contains(t, out, "left of Slurm job "+j.id+"'s walltime; a worker takes it with at least 7m10s left: ask for at least 11 minutes (sbatch --time=11)")
	j.requireNothingLeft(t)
	// Its status, later: the job's server is gone; the directory says it.
	st, code := run(t, baseEnv(t), "scheduler", "status", "--run-dir", filepath.Join(j.home, "runs", "allinone-"+j.id))
	require.Equal(t, 0, code, st)
	require.Contains(t, st, "every task was declined")
	require.Contains(t, st, "queue: not reachable (")
}

// TestSchedulerJob: scheduler.sbatch starts its own server and writes
// its address and credentials to a file of mode 600 for the workers; a
// worker that reads it (as slurm-bridge's would) runs the nodes, and the
// job ends with the run and removes the server, its store and the file.
func TestSchedulerJob(t *testing.T) {
	t.Parallel()
	e := startSlurm(t)
	srv := draftsLLM(t, func(n int) string { return runScript(fmt.Sprintf("echo \"METRIC score=%d\"\n", n)) })
	j := e.submitScript(t, "scheduler", srv.BaseURL(), nil, writeIdea(t, 2, 2))
	envFile := filepath.Join(j.home, "hpcq-nats-"+j.id+".env")
	testutil.Eventually(t, time.Minute, "the job's server address", func() bool { _, err := os.Stat(envFile); return err == nil })
	require.NotEmpty(t, jobProcesses(j.id, e.conf), "the job's processes are found while it runs (what requireNothingLeft looks for)")
	fi, err := os.Stat(envFile)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	// The file is shell: read it the way a worker job's shell would.
	cmd := exec.Command("bash", "-c", ". "+envFile+" && env | grep ^HPCQ_NATS_")
	vars, err := cmd.Output()
	require.NoError(t, err)
	var wenv []string
	for _, kv := range e.env {
		if !strings.HasPrefix(kv, "HPCQ_NATS_URL=") {
			wenv = append(wenv, kv)
		}
	}
	wenv = append(wenv, strings.Split(strings.TrimSpace(string(vars)), "\n")...)
	require.Contains(t, string(vars), "HPCQ_NATS_PASSWORD=")
	w := start(t, append(wenv, "HPCQ_WORK_DIR="+t.TempDir()), "worker", "--slots", "2", "--idle-exit", "5s")
	j.completed(t)
	require.NoFileExists(t, envFile)
	j.requireNothingLeft(t)
	w.wait(t, time.Minute)
}

// TestAllInOneDashboard: a job with HPCQ_HTTP serves the run's dashboard
// there while the run goes (a page, the API, a live event stream held open
// to the end), and its normal end logs no error: the dashboard ends with
// the run, the stream with it.
func TestAllInOneDashboard(t *testing.T) {
	t.Parallel()
	e := startSlurm(t)
	srv := draftsLLM(t, func(n int) string { return runScript(fmt.Sprintf("sleep 10\necho \"METRIC score=%d\"\n", n)) })
	idea := writeIdea(t, 2, 2)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	e.env = append(e.env, "HPCQ_HTTP="+addr)
	j := e.submitAllInOne(t, srv.BaseURL(), nil, idea)
	base := "http://" + addr
	var runID string
	testutil.Eventually(t, 2*time.Minute, "the job's dashboard to list its run", func() bool {
		runs := getJSON[struct{ Runs []struct{ ID string } }](base + "/api/runs").Runs
		if len(runs) == 1 {
			runID = runs[0].ID
		}
		return runID != ""
	})
	page, err := http.Get(base + "/")
	require.NoError(t, err)
	body, _ := io.ReadAll(page.Body)
	page.Body.Close()
	require.Equal(t, http.StatusOK, page.StatusCode)
	require.Contains(t, string(body), "<html")
	// The live stream, held open until the server ends it.
	resp, err := http.Get(base + "/api/runs/" + runID + "/events")
	require.NoError(t, err)
	streamed := make(chan string, 1)
	go func() {
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		streamed <- string(data)
	}()
	out := j.completed(t)
	select {
	case events := <-streamed:
		require.Contains(t, events, "event: node", "the stream told of the nodes")
	case <-time.After(30 * time.Second):
		t.Fatal("the event stream was not ended with the run")
	}
	require.NotContains(t, out, "level=ERROR", "a normal end logs no error")
	j.requireNothingLeft(t)
}

// getJSON is the JSON at url decoded as T, or T's zero value.
func getJSON[T any](url string) T {
	var v T
	resp, err := http.Get(url)
	if err != nil {
		return v
	}
	defer resp.Body.Close()
	_ = json.NewDecoder(resp.Body).Decode(&v)
	return v
}
