package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/schema"
)

// slurmEnv is a private Slurm and a nats-server for a bridge test, with
// the environment its processes (and the jobs they submit) share.
type slurmEnv struct {
	conf string
	nats *testutil.NATS
	env  []string
	dir  string
}

func startSlurm(t *testing.T) *slurmEnv {
	t.Helper()
	sl := testutil.StartService(t, "slurm")
	n := testutil.StartNATS(t, "nats-server")
	dir := t.TempDir()
	e := &slurmEnv{conf: sl.Env["SLURM_CONF"], nats: n, dir: dir}
	e.env = baseEnv(t, "SLURM_CONF="+e.conf, "HPCQ_NATS_URL="+n.URL, "HPCQ_WORK_DIR="+filepath.Join(dir, "work"),
		"HPCQ_ACK_WAIT=20s", "HPCQ_LOG_LEVEL=debug")
	return e
}

// bridgeConfig writes bridge.yaml with the given queues section.
func (e *slurmEnv) bridgeConfig(t *testing.T, name, queues string) string {
	t.Helper()
	path := filepath.Join(e.dir, name+".yaml")
	cfg := fmt.Sprintf("name: %s\ninterval: 500ms\nlog_dir: %s\nworker_bin: %s\nsbatch_timeout: 3s\nqueues:\n%s",
		name, filepath.Join(e.dir, "logs"), filepath.Join(binDir, "worker"), queues)
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o644))
	return path
}

// jobs lists the jobs of a name in this Slurm: with all, finished ones too.
func (e *slurmEnv) jobs(t *testing.T, name string, all bool) map[string]string {
	t.Helper()
	args := []string{"-h", "--name=" + name, "-o", "%i %T"}
	if all {
		args = append(args, "-t", "all")
	}
	cmd := exec.Command("squeue", args...)
	cmd.Env = e.env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	jobs := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			jobs[f[0]] = f[1]
		}
	}
	return jobs
}

// watchJobs records the most jobs of name alive at once until stop.
func (e *slurmEnv) watchJobs(t *testing.T, name string) (most func() int, stop func()) {
	var mu sync.Mutex
	peak := 0
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			n := len(e.jobs(t, name, false))
			mu.Lock()
			peak = max(peak, n)
			mu.Unlock()
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(done); wg.Wait() }) }
	t.Cleanup(stop)
	return func() int { mu.Lock(); defer mu.Unlock(); return peak }, stop
}

func sleepTasks(t *testing.T, dir string, n int, seconds string) []string {
	var files []string
	for i := range n {
		files = append(files, writeTask(t, dir, map[string]any{"v": 1, "node_id": fmt.Sprintf("t%02d", i),
			"artifacts": map[string]any{"run": map[string]any{"commands": []string{"sleep " + seconds}}}}))
	}
	return files
}

// TestBridgeScalesWithinMaxJobs: 20 queued tasks, max_jobs 3: at most 3
// worker jobs, every task finishes, the workers exit when idle, no job is
// left in squeue.
func TestBridgeScalesWithinMaxJobs(t *testing.T) {
	t.Parallel()
	e := startSlurm(t)
	cfg := e.bridgeConfig(t, "scale", `  cpu: {partition: debug, cpus_per_task: 1, slots: 2, max_jobs: 3, backlog: 3, idle_timeout: 3s, time_limit: "10"}
`)
	most, stopWatch := e.watchJobs(t, "scale-cpu")
	bridge := start(t, e.env, "slurm-bridge", "--config", cfg)
	out, code := run(t, e.env, "scheduler", append([]string{"exec", "--runs-dir", filepath.Join(e.dir, "runs"), "--timeout", "110s"},
		sleepTasks(t, e.dir, 20, "0.5")...)...)
	require.Equal(t, 0, code, out)
	testutil.Eventually(t, 60*time.Second, "the idle workers' jobs to end", func() bool { return len(e.jobs(t, "scale-cpu", false)) == 0 })
	stopWatch()
	require.LessOrEqual(t, most(), 3, "never more than max_jobs")
	all := e.jobs(t, "scale-cpu", true)
	require.NotEmpty(t, all)
	for id, state := range all {
		require.Equal(t, "COMPLETED", state, "job %s ended by itself (idle exit)", id)
	}
	testutil.Eventually(t, 10*time.Second, "the status to show no backlog and no jobs", func() bool {
		st, code := run(t, e.env, "slurm-bridge", "status", "--config", cfg)
		require.Equal(t, 0, code, st)
		return regexpMatch(`cpu\s+0\s+\d+\s+0\s+0\s+[1-3]\s+no`, st)
	})
	require.NoError(t, bridge.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, bridge.wait(t, 30*time.Second), bridge.output())

	// The configuration loses the pool: its recorded status is stale, and can be cleared.
	moved := e.bridgeConfig(t, "scale", `  gpu: {partition: debug}
`)
	st, code := run(t, e.env, "slurm-bridge", "status", "--config", moved)
	require.Equal(t, 0, code, st)
	require.Regexp(t, `(?m)^cpu\s.*stale: no longer in the configuration`, st)
	st, code = run(t, e.env, "slurm-bridge", "status", "--config", moved, "--clear-stale")
	require.Equal(t, 0, code, st)
	require.Contains(t, st, "cleared the status of pool cpu")
	st, code = run(t, e.env, "slurm-bridge", "status", "--config", moved)
	require.Equal(t, 0, code, st)
	require.NotRegexp(t, `(?m)^cpu\s`, st)
}

// TestBridgeBadPartitionPauses: a queue whose dry run fails is paused with
// the error; the other queue goes on; resume and status work.
func TestBridgeBadPartitionPauses(t *testing.T) {
	t.Parallel()
	e := startSlurm(t)
	cfg := e.bridgeConfig(t, "bad", `  cpu: {partition: debug, slots: 1, max_jobs: 1, idle_timeout: 2s, time_limit: "5"}
  big: {partition: nosuchpartition, slots: 1, max_jobs: 1}
`)
	bridge := start(t, e.env, "slurm-bridge", "--config", cfg)
	testutil.Eventually(t, 30*time.Second, "the bad queue paused", func() bool {
		out, _ := run(t, e.env, "slurm-bridge", "status", "--config", cfg)
		return regexpMatch(`big\s+0\s+0\s+0\s+0\s+0\s+yes.*dry run \(sbatch --test-only\) failed: .*nosuchpartition`, out) ||
			regexpMatch(`big\s+0\s+0\s+0\s+0\s+0\s+yes.*dry run \(sbatch --test-only\) failed: .*[Pp]artition`, out)
	})
	out, code := run(t, e.env, "scheduler", append([]string{"exec", "--runs-dir", filepath.Join(e.dir, "runs"), "--timeout", "60s"},
		sleepTasks(t, e.dir, 2, "0.1")...)...)
	require.Equal(t, 0, code, "the good queue still serves its pool\n%s", out)
	out, code = run(t, e.env, "slurm-bridge", "resume", "--config", cfg, "big")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "resume of big asked")
	out, code = run(t, e.env, "slurm-bridge", "resume", "--config", cfg, "nosuchpool")
	require.Equal(t, 1, code, out)
	require.Contains(t, bridge.output(), "queue paused")
}

// TestBridgeRestartAdoptsJobs: a bridge killed while its jobs run is
// restarted: it counts the running jobs as its own and submits no more.
func TestBridgeRestartAdoptsJobs(t *testing.T) {
	t.Parallel()
	e := startSlurm(t)
	cfg := e.bridgeConfig(t, "adopt", `  cpu: {partition: debug, slots: 1, max_jobs: 2, backlog: 2, idle_timeout: 3s, time_limit: "10"}
`)
	most, stopWatch := e.watchJobs(t, "adopt-cpu")
	first := start(t, e.env, "slurm-bridge", "--config", cfg)
	ex := start(t, e.env, "scheduler", append([]string{"exec", "--runs-dir", filepath.Join(e.dir, "runs"), "--timeout", "110s"},
		sleepTasks(t, e.dir, 6, "3")...)...)
	testutil.Eventually(t, 60*time.Second, "two jobs running", func() bool {
		n := 0
		for _, st := range e.jobs(t, "adopt-cpu", false) {
			if st == "RUNNING" {
				n++
			}
		}
		return n == 2
	})
	require.NoError(t, first.cmd.Process.Signal(syscall.SIGKILL))
	first.wait(t, 10*time.Second)
	second := start(t, e.env, "slurm-bridge", "--config", cfg)
	require.Equal(t, 0, ex.wait(t, 2*time.Minute), ex.output())
	testutil.Eventually(t, 60*time.Second, "the jobs to end", func() bool { return len(e.jobs(t, "adopt-cpu", false)) == 0 })
	stopWatch()
	require.LessOrEqual(t, most(), 2)
	require.Len(t, e.jobs(t, "adopt-cpu", true), 2, "the restarted bridge submitted nothing: the two running jobs were its own")
	require.NoError(t, second.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, second.wait(t, 30*time.Second), second.output())
}

// TestBridgeEndsWithItsServer: when the NATS server goes (a scheduler
// job's ends with its job), the bridge says so once, waits
// server_gone_exit, then stops and cancels its jobs, running ones too:
// nothing is left polling a server that is gone.
func TestBridgeEndsWithItsServer(t *testing.T) {
	t.Parallel()
	e := startSlurm(t)
	cfg := e.bridgeConfig(t, "gone", `  cpu: {partition: debug, slots: 1, max_jobs: 1, backlog: 1, idle_timeout: 5m, time_limit: "10"}
`)
	b := start(t, append(e.env, "HPCQ_BRIDGE_SERVER_GONE_EXIT=4s"), "slurm-bridge", "--config", cfg)
	ex := start(t, e.env, "scheduler", append([]string{"exec", "--runs-dir", filepath.Join(e.dir, "runs"), "--timeout", "110s"},
		sleepTasks(t, e.dir, 1, "100")...)...)
	testutil.Eventually(t, 60*time.Second, "the bridge's job running", func() bool {
		for _, st := range e.jobs(t, "gone-cpu", false) {
			if st == "RUNNING" {
				return true
			}
		}
		return false
	})
	e.nats.Stop()
	require.Equal(t, 0, b.wait(t, 60*time.Second), b.output())
	out := b.output()
	require.Equal(t, 1, strings.Count(out, "the NATS server is away"), "said once:\n%s", out)
	require.Contains(t, out, "the NATS server is gone: the bridge stops and cancels its jobs")
	testutil.Eventually(t, 60*time.Second, "its running job cancelled", func() bool { return len(e.jobs(t, "gone-cpu", false)) == 0 })
	_ = ex // its server is gone too: stopped with the test
}

// TestWalltimeSignalHandsBack: a worker job whose time limit comes while
// it runs a task hands the task back at the signal and ends before its
// TIMEOUT; another worker completes the task.
func TestWalltimeSignalHandsBack(t *testing.T) {
	t.Parallel()
	e := startSlurm(t)
	// A 1-minute limit, the signal asked for 55 s before it: slurmctld
	// checks time limits about every 30 s, so it comes 5 to 35 s into the
	// job, while the task (65 s, longer than the limit) runs.
	cfg := e.bridgeConfig(t, "wall", `  cpu: {partition: debug, slots: 1, max_jobs: 1, idle_timeout: 2m, time_limit: "1", signal_grace: 55s}
`)
	bridge := start(t, e.env, "slurm-bridge", "--config", cfg)
	q := e.nats.Queue(t, queue.Options{AckWait: 20 * time.Second})
	ex := start(t, e.env, "scheduler", append([]string{"exec", "--json", "--runs-dir", filepath.Join(e.dir, "runs"), "--timeout", "200s"},
		sleepTasks(t, e.dir, 1, "65")...)...)
	var jobID string
	testutil.Eventually(t, 60*time.Second, "the Slurm worker running the task", func() bool {
		ws, err := q.Workers(context.Background())
		require.NoError(t, err)
		for _, w := range ws {
			if w.SlurmJobID != "" && w.Running == 1 {
				jobID = w.SlurmJobID
				require.False(t, w.Deadline.IsZero(), "the worker knows its walltime")
				return true
			}
		}
		return false
	})
	// Stop the bridge from replacing the job; a static worker completes the task.
	require.NoError(t, bridge.cmd.Process.Signal(syscall.SIGTERM))
	bridge.wait(t, 30*time.Second)
	start(t, append(e.env, "HPCQ_WORKER_ID=static"), "worker", "--slots", "1")
	require.Equal(t, 0, ex.wait(t, 4*time.Minute), ex.output())
	require.Contains(t, ex.output(), `"worker":"static"`)
	cmd := exec.Command("scontrol", "show", "job", jobID)
	cmd.Env = e.env
	info, err := cmd.CombinedOutput()
	require.NoError(t, err, string(info))
	require.Contains(t, string(info), "JobState=COMPLETED", "the job ended by itself at the signal, not by TIMEOUT:\n%s", info)
	logs, _ := filepath.Glob(filepath.Join(e.dir, "logs", "wall-cpu-"+jobID+".out"))
	require.Len(t, logs, 1)
	data, err := os.ReadFile(logs[0])
	require.NoError(t, err)
	require.Contains(t, string(data), "task handed back (drain)")
}

// TestBridgeSlurmFaults: sbatch that hangs and squeue that fails (scripts
// on PATH: a real Slurm does neither on demand).
func TestBridgeSlurmFaults(t *testing.T) {
	t.Parallel()
	n := testutil.StartNATS(t, "nats-server")
	dir := t.TempDir()
	fake := filepath.Join(dir, "bin")
	require.NoError(t, os.MkdirAll(fake, 0o755))
	// sbatch: the dry run passes, a submission hangs past sbatch_timeout.
	require.NoError(t, os.WriteFile(filepath.Join(fake, "sbatch"), []byte("#!/bin/sh\n[ \"$1\" = --test-only ] && exit 0\nsleep 30\n"), 0o755))
	// squeue: fails while the file "squeue-down" exists.
	require.NoError(t, os.WriteFile(filepath.Join(fake, "squeue"), []byte(fmt.Sprintf(
		"#!/bin/sh\nif [ -e %s/squeue-down ]; then echo 'slurm_load_jobs error: Unable to contact slurm controller' >&2; exit 1; fi\nexit 0\n", dir)), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(fake, "scancel"), []byte("#!/bin/sh\nexit 0\n"), 0o755))
	env := baseEnv(t, "HPCQ_NATS_URL="+n.URL, "PATH="+fake+":"+os.Getenv("PATH"))
	cfgPath := filepath.Join(dir, "bridge.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(fmt.Sprintf("name: faults\ninterval: 200ms\nsbatch_timeout: 1s\npause_after: 2\nlog_dir: %s\nqueues:\n  cpu: {max_jobs: 2}\n",
		filepath.Join(dir, "logs"))), 0o644))
	q := n.Queue(t, queue.Options{})
	_, err := q.PublishTask(context.Background(), &schema.NodeTask{V: 1, RunID: "r", NodeID: "waiting", Attempt: 1, Pool: "cpu",
		Artifacts: schema.Artifacts{Run: schema.RunPhase{Commands: []string{"true"}}}})
	require.NoError(t, err)
	_, err = q.PublishTask(context.Background(), &schema.NodeTask{V: 1, RunID: "r", NodeID: "gpu-task", Attempt: 1, Pool: "gpu",
		Artifacts: schema.Artifacts{Run: schema.RunPhase{Commands: []string{"true"}}}})
	require.NoError(t, err)
	bridge := start(t, env, "slurm-bridge", "--config", cfgPath)
	testutil.Eventually(t, 30*time.Second, "the queue paused after 2 hanging sbatch calls", func() bool {
		out, _ := run(t, env, "slurm-bridge", "status", "--config", cfgPath)
		return regexpMatch(`cpu\s+1\s+0\s+0\s+0\s+0\s+yes.*2 submissions failed in a row; last: slurm: sbatch timed out after 1s`, out)
	})
	out, _ := run(t, env, "slurm-bridge", "status", "--config", cfgPath)
	require.Regexp(t, `gpu\s+1\s+.*no allocation queue serves this pool`, out, "tasks no queue can satisfy are reported")

	// A resume request and a reload both unpause it; it pauses again when
	// sbatch still hangs.
	resumed, code := run(t, env, "slurm-bridge", "resume", "--config", cfgPath, "cpu")
	require.Equal(t, 0, code, resumed)
	testutil.Eventually(t, 30*time.Second, "the resume taken", func() bool { return strings.Contains(bridge.output(), "queue resumed on request") })
	require.NoError(t, bridge.cmd.Process.Signal(syscall.SIGHUP))
	testutil.Eventually(t, 30*time.Second, "the reload taken", func() bool {
		return strings.Contains(bridge.output(), "configuration reloaded; paused queues resume")
	})
	testutil.Eventually(t, 30*time.Second, "paused again", func() bool {
		out, _ := run(t, env, "slurm-bridge", "status", "--config", cfgPath)
		return regexpMatch(`cpu\s+1\s+0\s+0\s+0\s+0\s+yes`, out)
	})

	require.NoError(t, os.WriteFile(filepath.Join(dir, "squeue-down"), nil, 0o644))
	testutil.Eventually(t, 30*time.Second, "the squeue failure reported", func() bool {
		out, _ := run(t, env, "slurm-bridge", "status", "--config", cfgPath)
		return regexpMatch(`squeue: slurm: squeue: exit status 1: slurm_load_jobs error`, out)
	})
	require.NotContains(t, bridge.output(), "worker job submitted")
	require.NoError(t, os.Remove(filepath.Join(dir, "squeue-down")))
	testutil.Eventually(t, 30*time.Second, "the squeue error cleared once it answers again", func() bool {
		out, _ := run(t, env, "slurm-bridge", "status", "--config", cfgPath)
		return !strings.Contains(out, "squeue: slurm") && regexpMatch(`cpu\s+1\s+0\s+0\s+0\s+0\s+yes.*2 submissions failed in a row`, out)
	})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "squeue-down"), nil, 0o644))
	require.NoError(t, bridge.cmd.Process.Signal(syscall.SIGTERM))
	code = bridge.wait(t, 30*time.Second)
	require.Equal(t, 1, code, "shutdown cannot list its jobs while squeue fails, and says so:\n%s", bridge.output())
	require.Contains(t, bridge.output(), "shutdown: jobs not cancelled")
}

// TestBridgeShutdownCancelsOnlyItsOwn: at SIGTERM the bridge cancels its
// pending jobs and leaves a job of the same name it did not submit; with
// --cancel-running it cancels its running jobs too.
func TestBridgeShutdownCancelsOnlyItsOwn(t *testing.T) {
	t.Parallel()
	e := startSlurm(t)
	q := e.nats.Queue(t, queue.Options{})
	_, err := q.PublishTask(context.Background(), &schema.NodeTask{V: 1, RunID: "r", NodeID: "later", Attempt: 1, Pool: "cpu",
		Artifacts: schema.Artifacts{Run: schema.RunPhase{Commands: []string{"sleep 30"}}}})
	require.NoError(t, err)

	// Pending: the queue's jobs may start only in an hour.
	cfg := e.bridgeConfig(t, "own", `  cpu: {partition: debug, slots: 1, max_jobs: 1, time_limit: "5", extra_args: ["--begin=now+3600"]}
`)
	foreign := exec.Command("sbatch", "--parsable", "--job-name=own-cpu", "--begin=now+3600", "--output=/dev/null", "--wrap", "sleep 1")
	foreign.Env = e.env
	out, err := foreign.Output()
	require.NoError(t, err)
	foreignID := strings.TrimSpace(string(out))
	b := start(t, e.env, "slurm-bridge", "--config", cfg)
	testutil.Eventually(t, 30*time.Second, "the bridge's pending job", func() bool { return len(e.jobs(t, "own-cpu", false)) == 2 })
	require.NoError(t, b.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, b.wait(t, 30*time.Second), b.output())
	left := e.jobs(t, "own-cpu", false)
	require.Equal(t, map[string]string{foreignID: "PENDING"}, left, "only the bridge's own job was cancelled")

	// Running, with --cancel-running.
	cfg = e.bridgeConfig(t, "run", `  cpu: {partition: debug, slots: 1, max_jobs: 1, time_limit: "5"}
`)
	b = start(t, e.env, "slurm-bridge", "--config", cfg, "--cancel-running")
	var id string
	testutil.Eventually(t, 60*time.Second, "the bridge's job running", func() bool {
		for j, st := range e.jobs(t, "run-cpu", false) {
			if st == "RUNNING" {
				id = j
				return true
			}
		}
		return false
	})
	require.NoError(t, b.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, b.wait(t, 30*time.Second), b.output())
	testutil.Eventually(t, 30*time.Second, "the running job cancelled", func() bool {
		return e.jobs(t, "run-cpu", true)[id] == "CANCELLED"
	})
	require.Contains(t, e.jobs(t, "own-cpu", false), foreignID)
}

// TestRunOnSlurm: the whole story on a cluster: `scheduler run` against a
// nats-server, no worker at start, slurm-bridge starting workers as Slurm
// jobs for the nodes' tasks; the run completes and the jobs end idle.
func TestRunOnSlurm(t *testing.T) {
	t.Parallel()
	e := startSlurm(t)
	srv := draftsLLM(t, func(n int) string { return runScript(fmt.Sprintf("echo \"METRIC score=%d\"\n", n)) })
	idea := writeIdea(t, 3, 2)
	cfg := e.bridgeConfig(t, "run", `  cpu: {partition: debug, slots: 2, max_jobs: 1, idle_timeout: 3s, time_limit: "10"}
`)
	maddr := freeAddr(t)
	bridge := start(t, e.env, "slurm-bridge", "--config", cfg, "--metrics-addr", maddr)
	runDir := filepath.Join(e.dir, "run-slurm")
	out, code := run(t, append(e.env, "OPENAI_BASE_URL="+srv.BaseURL(), "OPENAI_API_KEY=test-key"),
		"scheduler", "run", "--wait-workers", "1s", "--run-dir", runDir, idea)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "3 nodes (0 buggy")
	require.Contains(t, out, "best n0003: score = 3")
	q, code := run(t, e.env, "scheduler", "query", "--run-dir", runDir, "--format", "csv",
		"SELECT count(*) AS n FROM phase_runs WHERE phase = 'run' AND status = 'ok'")
	require.Equal(t, 0, code, q)
	require.Contains(t, q, "n\n3\n", "the scheduler wrote the remote workers' rows")
	var scores []string
	for i := 1; i <= 3; i++ {
		// Each node's run log came home from the Slurm job through the object store.
		log, err := os.ReadFile(filepath.Join(runDir, "nodes", fmt.Sprintf("n%04d", i), "logs", "run.log"))
		require.NoError(t, err)
		m := regexp.MustCompile(`METRIC score=(\d)`).FindStringSubmatch(string(log))
		require.NotNil(t, m, string(log))
		scores = append(scores, m[1])
	}
	sort.Strings(scores)
	require.Equal(t, []string{"1", "2", "3"}, scores)
	testutil.Eventually(t, 60*time.Second, "the worker job to end idle", func() bool { return len(e.jobs(t, "run-cpu", false)) == 0 })
	all := e.jobs(t, "run-cpu", true)
	require.Len(t, all, 1, "one worker job ran the nodes")
	m := scrape(maddr)
	require.Contains(t, m, `hpcq_bridge_submissions_total{pool="cpu"} 1`, "the bridge's metrics")
	require.Contains(t, m, `hpcq_bridge_paused{pool="cpu"} 0`)
	require.NoError(t, bridge.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, bridge.wait(t, 30*time.Second), bridge.output())
}

// TestBridgeChecksWorkerBin: a worker_bin that is not there is a
// configuration error at start, not a job failing later on a node, and
// the bridge has made nothing (no log_dir) when it says so.
func TestBridgeChecksWorkerBin(t *testing.T) {
	t.Parallel()
	n := testutil.StartNATS(t, "nats-server")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "bridge.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf("name: wb\nlog_dir: %s\nworker_bin: %s\nqueues:\n  cpu: {partition: debug}\n",
		filepath.Join(dir, "logs"), filepath.Join(dir, "no-worker"))), 0o644))
	out, code := run(t, baseEnv(t, "HPCQ_NATS_URL="+n.URL), "slurm-bridge", "--config", cfg)
	require.NotEqual(t, 0, code, out)
	require.Contains(t, out, "worker_bin "+filepath.Join(dir, "no-worker")+": ")
	require.Contains(t, out, "no such file")
	require.NoDirExists(t, filepath.Join(dir, "logs"), "nothing made before the whole configuration is checked")
}

// TestPrometheusScrapes: a real Prometheus server scrapes the three
// processes of a cluster (a worker, slurm-bridge, the scheduler of a run)
// and their series read back through its HTTP API.
func TestPrometheusScrapes(t *testing.T) {
	t.Parallel()
	e := startSlurm(t)
	addrs := freeAddrs(t, 3)
	waddr, baddr, saddr := addrs[0], addrs[1], addrs[2]
	prom := testutil.StartServiceWith(t, "prometheus", func(dir string) {
		cfg := fmt.Sprintf("global: {scrape_interval: 1s, scrape_timeout: 1s}\nscrape_configs:\n  - job_name: hpcq\n    static_configs:\n      - targets: [%q, %q, %q]\n",
			waddr, baddr, saddr)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644))
	})
	api := prom.Env["HPCQ_PROMETHEUS_URL"] + "/api/v1/query?query="
	query := func(q string) string {
		resp, err := http.Get(api + url.QueryEscape(q))
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return string(data)
	}
	start(t, append(e.env, "HPCQ_WORK_DIR="+t.TempDir()), "worker", "--pools", "cpu", "--slots", "1", "--metrics-addr", waddr)
	cfg := e.bridgeConfig(t, "prom", `  cpu: {partition: debug, slots: 1, max_jobs: 1, idle_timeout: 3s, time_limit: "10"}
`)
	start(t, e.env, "slurm-bridge", "--config", cfg, "--metrics-addr", baddr)
	srv := draftsLLM(t, func(n int) string { return runScript("sleep 8\necho 'METRIC score=2'\n") })
	p := start(t, append(e.env, "OPENAI_BASE_URL="+srv.BaseURL(), "OPENAI_API_KEY=test-key"),
		"scheduler", "run", "--run-dir", filepath.Join(e.dir, "run-prom"), "--metrics-addr", saddr, writeIdea(t, 1, 1))
	testutil.Eventually(t, 60*time.Second, "Prometheus to scrape all three", func() bool {
		return strings.Count(query(`up{job="hpcq"} == 1`), `"instance"`) == 3
	})
	testutil.Eventually(t, 30*time.Second, "the scheduler's LLM calls in Prometheus", func() bool {
		return strings.Contains(query(`hpcq_llm_calls_total{purpose="draft"}`), `"model":"test-model"`)
	})
	require.Contains(t, query(`hpcq_bridge_paused`), `"pool":"cpu"`)
	require.Contains(t, query(`hpcq_worker_slots{state="total"}`), `"value":[`)
	require.Equal(t, 0, p.wait(t, 60*time.Second), p.output())
	testutil.Eventually(t, 30*time.Second, "the worker's task in Prometheus", func() bool {
		return strings.Contains(query(`hpcq_worker_tasks_total{status="ok"}`), `"pool":"cpu"`)
	})
}
