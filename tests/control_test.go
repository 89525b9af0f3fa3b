package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/fakellm"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// TestLocalRunControl: while a local run goes, a second process reaches it
// through the loopback server recorded in the run directory (mode 0600):
// status sees its worker, ls its running node with the worker, logs its
// live output (and --follow until the node ends); cancel stops it: the
// running command is killed, the run and node end canceled, and --resume
// says the run was canceled.
func TestLocalRunControl(t *testing.T) {
	t.Parallel()
	marker := fmt.Sprintf("hpcq-control-%d", time.Now().UnixNano())
	srv := draftsLLM(t, func(n int) string {
		return runScript(fmt.Sprintf("echo started %d\nbash -c 'sleep 120; true' %s\necho 'METRIC score=%d'\n", n, marker, n))
	})
	idea := writeIdea(t, 3, 1)
	runDir := filepath.Join(t.TempDir(), "run-control")
	env := baseEnv(t, "OPENAI_BASE_URL="+srv.BaseURL(), "OPENAI_API_KEY=test-key")
	p := start(t, env, "scheduler", "run", "--local", "--run-dir", runDir, idea)
	testutil.Eventually(t, 90*time.Second, "the first node's command to run", func() bool { return len(testutil.ProcessesWith(marker)) > 0 })

	if strings.Contains(p.output(), "own PID and mount namespaces") {
		require.Contains(t, p.output(), "helper: "+filepath.Join(binDir, "hpcq-sandbox"), "the small helper beside the binary starts the commands")
	}
	fi, err := os.Stat(filepath.Join(runDir, "server.json"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "server.json holds a password")

	st, code := run(t, env, "scheduler", "status", "--run-dir", runDir)
	require.Equal(t, 0, code, st)
	require.Contains(t, st, "local-1", "status reaches the going run's queue and sees its worker")

	testutil.Eventually(t, 30*time.Second, "ls to show the node running on its worker", func() bool {
		out, code := run(t, env, "scheduler", "ls", "--run-dir", runDir)
		require.Equal(t, 0, code, out)
		return regexpMatch(`(?m)^n0001\s+1\s+draft\s+running\s+1\s+local-1\s+-\s+\d\d:\d\d:\d\d\s+\S+\s+-$`, out)
	})
	out, code := run(t, env, "scheduler", "ls", "--run-dir", runDir, "--json")
	require.Equal(t, 0, code, out)
	var first map[string]any
	require.NoError(t, json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &first))
	require.Equal(t, "n0001", first["node"])
	require.Equal(t, "running", first["status"])

	out, code = run(t, env, "scheduler", "logs", "--run-dir", runDir, "n0001")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "started 1", "the live output so far")
	follow := start(t, env, "scheduler", "logs", "--run-dir", runDir, "--follow", "n0001")
	testutil.Eventually(t, 30*time.Second, "logs --follow to be following", func() bool { return strings.Contains(follow.output(), "started 1") })

	out, code = run(t, env, "scheduler", "cancel", "--run-dir", runDir, "--reason", "enough")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "canceled")
	code = p.wait(t, 60*time.Second)
	require.NotEqual(t, 0, code, p.output())
	require.Contains(t, p.output(), "canceled: enough")
	testutil.RequireNoProcessWith(t, marker)
	require.Equal(t, 0, follow.wait(t, 30*time.Second), follow.output())
	require.Contains(t, follow.output(), "started 1")
	require.NoFileExists(t, filepath.Join(runDir, "server.json"), "removed when the run ends")

	out, code = run(t, env, "scheduler", "ls", "--run-dir", runDir)
	require.Equal(t, 0, code, out)
	require.Regexp(t, `(?m)^n0001\s+1\s+draft\s+canceled\s`, out)
	q, code := run(t, env, "scheduler", "query", "--run-dir", runDir, "--format", "csv",
		"SELECT status FROM runs; SELECT 1")
	require.NotEqual(t, 0, code, q)
	q, code = run(t, env, "scheduler", "query", "--run-dir", runDir, "--format", "csv", "SELECT status FROM runs")
	require.Equal(t, 0, code, q)
	require.Equal(t, "status\ncanceled\n", q)
	q, code = run(t, env, "scheduler", "query", "--run-dir", runDir, "--format", "csv",
		"SELECT node, status, error_kind FROM nodes WHERE node = 'n0001'")
	require.Equal(t, 0, code, q)
	require.Equal(t, "node,status,error_kind\nn0001,canceled,canceled\n", q)

	out, code = run(t, env, "scheduler", "run", "--local", "--resume", runDir)
	require.NotEqual(t, 0, code, out)
	require.Contains(t, out, "was canceled (enough): it cannot be resumed")

	// A run that is not going cannot be canceled, and says why.
	out, code = run(t, env, "scheduler", "cancel", "--run-dir", runDir)
	require.NotEqual(t, 0, code, out)
	require.Contains(t, out, "the run is not going")
}

// TestExecInterruptCancels: Ctrl-C on scheduler exec cancels its tasks: the
// running command is killed, not left to run to its end, and the run and
// the task are canceled in the results.
func TestExecInterruptCancels(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := fmt.Sprintf("hpcq-exec-int-%d", time.Now().UnixNano())
	taskFile := writeTask(t, dir, map[string]any{"v": 1, "node_id": "long", "attempt": 1, "pool": "cpu",
		"artifacts": map[string]any{"run": map[string]any{"commands": []string{"echo begun; sleep 120; echo " + marker}}}})
	env := baseEnv(t, "HPCQ_RUNS_DIR="+filepath.Join(dir, "runs"))
	p := start(t, env, "scheduler", "exec", "--local", taskFile)
	testutil.Eventually(t, 60*time.Second, "the task's command to run", func() bool { return len(testutil.ProcessesWith(marker)) > 0 })
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGINT))
	code := p.wait(t, 60*time.Second)
	require.NotEqual(t, 0, code, p.output())
	testutil.RequireNoProcessWith(t, marker)
	runs, _ := filepath.Glob(filepath.Join(dir, "runs", "*", "run.json"))
	require.Len(t, runs, 1)
	runDir := filepath.Dir(runs[0])
	q, code := run(t, env, "scheduler", "query", "--run-dir", runDir, "--format", "csv", "SELECT status FROM runs")
	require.Equal(t, 0, code, q)
	require.Equal(t, "status\ncanceled\n", q)
	q, code = run(t, env, "scheduler", "query", "--run-dir", runDir, "--format", "csv", "SELECT node, status FROM nodes")
	require.Equal(t, 0, code, q)
	require.Equal(t, "node,status\nlong,canceled\n", q)
}

// TestClusterRunControl: the same control on a cluster: nats-server, a
// worker process with Redis and ClickHouse settings, the scheduler in
// cluster mode. ls shows the running node on that worker; cancel reaches
// the worker process, which stops the command; the node's recall events
// were written to Redis by the worker; purge empties the server of the run,
// and purge --memory moves its memory out of Redis.
func TestClusterRunControl(t *testing.T) {
	t.Parallel()
	nats := testutil.StartNATS(t, "nats-server")
	redis := testutil.StartService(t, "redis")
	ch := testutil.StartService(t, "clickhouse")
	marker := fmt.Sprintf("hpcq-cluster-control-%d", time.Now().UnixNano())
	srv := draftsLLM(t, func(n int) string {
		return runScript(fmt.Sprintf("echo started %d\nbash -c 'sleep 120; true' %s\n", n, marker))
	})
	idea := writeIdea(t, 2, 1)
	stores := []string{"HPCQ_NATS_URL=" + nats.URL, "HPCQ_REDIS_URL=" + redis.Env["HPCQ_REDIS_URL"],
		"HPCQ_CLICKHOUSE_DSN=" + ch.Env["HPCQ_CLICKHOUSE_DSN"]}
	workerEnv := baseEnv(t, append(stores, "HPCQ_WORK_DIR="+t.TempDir(), "HPCQ_SPOOL_DIR="+t.TempDir(), "HPCQ_WORKER_ID=cw1")...)
	wk := start(t, workerEnv, "worker", "--pools", "cpu", "--slots", "1")
	env := baseEnv(t, append(stores, "OPENAI_BASE_URL="+srv.BaseURL(), "OPENAI_API_KEY=test-key", "HPCQ_SPOOL_DIR="+t.TempDir())...)
	runDir := filepath.Join(t.TempDir(), "run-cluster-control")
	p := start(t, env, "scheduler", "run", "--run-dir", runDir, idea)
	testutil.Eventually(t, 90*time.Second, "the first node's command to run", func() bool { return len(testutil.ProcessesWith(marker)) > 0 })
	testutil.Eventually(t, 30*time.Second, "ls to show the node running on the worker process", func() bool {
		out, code := run(t, env, "scheduler", "ls", "--run-dir", runDir)
		require.Equal(t, 0, code, out)
		return regexpMatch(`(?m)^n0001\s+1\s+draft\s+running\s+1\s+cw1\s`, out)
	})
	out, code := run(t, env, "scheduler", "logs", "--run-dir", runDir, "--phase", "run", "n0001")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "started 1")

	out, code = run(t, env, "scheduler", "cancel", "--run-dir", runDir)
	require.Equal(t, 0, code, out)
	code = p.wait(t, 60*time.Second)
	require.NotEqual(t, 0, code, p.output())
	testutil.Eventually(t, 30*time.Second, "the worker to stop the canceled command", func() bool {
		return len(testutil.ProcessesWith(marker)) == 0
	})
	require.Contains(t, wk.output(), "stopping a canceled task")

	// The worker process wrote n0001's phase events into Redis (mirrored to ClickHouse).
	testutil.Eventually(t, 30*time.Second, "the worker's recall events in ClickHouse", func() bool {
		q, code := run(t, env, "scheduler", "query", "--run", "run-cluster-control", "--format", "csv",
			"SELECT count() AS n FROM recall_events WHERE run = 'run-cluster-control' AND branch = 'n0001' AND kind IN ('phase_complete', 'phase_started') AND phase IN ('coding', 'run')")
		return code == 0 && strings.Contains(q, "n\n2\n")
	})
	q, code := run(t, env, "scheduler", "query", "--all-runs", "--format", "csv",
		"SELECT status FROM runs FINAL WHERE run = 'run-cluster-control'")
	require.Equal(t, 0, code, q)
	require.Equal(t, "status\ncanceled\n", q)

	out, code = run(t, env, "scheduler", "purge", "--run-dir", runDir)
	require.Equal(t, 0, code, out)
	require.Regexp(t, `run run-cluster-control purged from the server: \d+ task\(s\), \d+ result\(s\), \d+ artifact\(s\)`, out)

	// The ended run's memory moves out of Redis into its run directory,
	// where an export finds it without Redis.
	out, code = run(t, env, "scheduler", "purge", "--memory", "--run-dir", runDir)
	require.Equal(t, 0, code, out)
	require.Regexp(t, `run run-cluster-control's memory moved out of Redis into \S+/memory/memory.sqlite: [1-9]\d* branch\(es\), \d+ core version\(s\), [1-9]\d* recall event\(s\), .*; [1-9]\d* Redis key\(s\) removed`, out)
	noRedis := baseEnv(t, "HPCQ_NATS_URL="+nats.URL, "HPCQ_CLICKHOUSE_DSN="+ch.Env["HPCQ_CLICKHOUSE_DSN"], "OPENAI_BASE_URL="+srv.BaseURL(), "OPENAI_API_KEY=test-key")
	out, code = run(t, noRedis, "scheduler", "export", "--run-dir", runDir)
	require.Equal(t, 0, code, out)
	out, code = run(t, env, "scheduler", "purge", "--memory", "--run-dir", runDir)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "0 Redis key(s) removed", "done before")

	// The canceled run's paper, later, from its directory and ClickHouse: its
	// facts read FINAL, the writeup's calls rows of ClickHouse's llm_calls.
	testutil.RequireBinary(t, "latexmk", "scripts/services.sh install tex")
	paper := fakellm.New(t, func(r fakellm.Request) fakellm.Reply {
		if r.Kind != "writeup" {
			return fakellm.Reply{Status: 400}
		}
		return fakellm.Reply{Content: "```latex\n\\documentclass{article}\n\\begin{document}\nThe run was canceled after \\fact{nodes} nodes.\n\\end{document}\n```"}
	})
	out, code = run(t, append(noRedis, "OPENAI_BASE_URL="+paper.BaseURL()), "scheduler", "writeup", "--run-dir", runDir)
	require.Equal(t, 0, code, out)
	require.Regexp(t, `writeup pdf=\S+paper.pdf pages=1 numbers=0 verified=0 unverified=0 citations=0 citations_removed=0 rounds=1\n`, out)
	facts, err := os.ReadFile(filepath.Join(runDir, rundir.PaperDir, rundir.FactsFile))
	require.NoError(t, err)
	require.Contains(t, string(facts), "FROM nodes FINAL WHERE run = 'run-cluster-control'")
	q, code = run(t, env, "scheduler", "query", "--run", "run-cluster-control", "--format", "csv",
		"SELECT purpose, count() AS n FROM llm_calls FINAL WHERE run = 'run-cluster-control' AND node = 'paper' GROUP BY purpose")
	require.Equal(t, 0, code, q)
	require.Equal(t, "purpose,n\nwriteup,1\n", q)
}

// TestVersion: every binary answers --version with its name and version.
func TestVersion(t *testing.T) {
	for _, bin := range []string{"scheduler", "worker", "slurm-bridge"} {
		out, code := run(t, baseEnv(t), bin, "--version")
		require.Equal(t, 0, code, out)
		require.Regexp(t, "^"+bin+` \S+\n$`, out)
	}
}

// TestCompletion: the completion scripts work in bash: subcommands, then
// the subcommand's flags.
func TestCompletion(t *testing.T) {
	for _, c := range []struct{ bin, words, want string }{
		{"scheduler", "scheduler l", "logs ls"},
		{"scheduler", "scheduler logs --fo", "--follow"},
		{"worker", "worker --slo", "--slots"},
		{"slurm-bridge", "slurm-bridge status --js", "--json"},
	} {
		script := fmt.Sprintf(`source <(%s completion bash); COMP_WORDS=(%s); COMP_CWORD=$((${#COMP_WORDS[@]}-1)); _%s; echo "${COMPREPLY[@]}"`,
			filepath.Join(binDir, c.bin), c.words, strings.ReplaceAll(c.bin, "-", "_"))
		out, err := exec.Command("bash", "-c", script).CombinedOutput()
		require.NoError(t, err, string(out))
		require.Equal(t, c.want, strings.TrimSpace(string(out)), c.words)
	}
	out, code := run(t, baseEnv(t), "scheduler", "completion", "tcsh")
	require.Equal(t, 2, code, out)
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	return freeAddrs(t, 1)[0]
}

// freeAddrs are n loopback addresses free now, all different: each is held
// until all are chosen (the kernel may hand a port just closed out again:
// seen, a worker and a bridge given one metrics port).
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		addrs[i] = ln.Addr().String()
	}
	return addrs
}

// scrape reads http://addr/metrics; "" when it does not answer.
func scrape(addr string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return string(data)
}

// TestMetricsEndpoints: a worker and the scheduler of a cluster run serve
// Prometheus metrics: tasks by pool and status, phase durations, slots;
// LLM calls by purpose and model, nodes by kind and status.
func TestMetricsEndpoints(t *testing.T) {
	t.Parallel()
	nats := testutil.StartNATS(t, "nats-server")
	srv := draftsLLM(t, func(n int) string { return runScript("sleep 2\necho 'METRIC score=4'\n") })
	idea := writeIdea(t, 1, 1)
	addrs := freeAddrs(t, 2)
	waddr, saddr := addrs[0], addrs[1]
	start(t, baseEnv(t, "HPCQ_NATS_URL="+nats.URL, "HPCQ_WORK_DIR="+t.TempDir()), "worker", "--pools", "cpu", "--slots", "1", "--metrics-addr", waddr)
	p := start(t, baseEnv(t, "HPCQ_NATS_URL="+nats.URL, "OPENAI_BASE_URL="+srv.BaseURL(), "OPENAI_API_KEY=test-key"),
		"scheduler", "run", "--run-dir", filepath.Join(t.TempDir(), "run-metrics"), "--metrics-addr", saddr, idea)
	var sched string
	// The draft's call is counted before its task is published and maybe
	// before the worker registered: the cpu pool can be unknown to the queue
	// at that scrape, so both are waited for.
	testutil.Eventually(t, 60*time.Second, "the scheduler's LLM calls and the queue's cpu pool in its metrics", func() bool {
		sched = scrape(saddr)
		return strings.Contains(sched, `hpcq_llm_calls_total{model="test-model",outcome="ok",purpose="draft"} 1`) &&
			strings.Contains(sched, `hpcq_queue_tasks{pool="cpu",state="pending"}`)
	})
	require.Contains(t, sched, "hpcq_llm_latency_seconds_bucket{")
	require.Contains(t, sched, `hpcq_memory_op_duration_seconds_count{op="fork",outcome="ok"}`, "memory operations")
	testutil.Eventually(t, 30*time.Second, "the live worker in the scheduler's queue metrics", func() bool {
		return strings.Contains(scrape(saddr), `hpcq_queue_workers{pool="cpu",state="live"} 1`)
	})
	require.Contains(t, sched, "go_goroutines ")
	require.Equal(t, 0, p.wait(t, 60*time.Second), p.output())
	w := scrape(waddr)
	require.Contains(t, w, `hpcq_worker_tasks_total{pool="cpu",status="ok"} 1`)
	require.Contains(t, w, `hpcq_worker_phase_duration_seconds_count{phase="run",pool="cpu"} 1`)
	require.Contains(t, w, `hpcq_worker_slots{state="total"} 1`)
	require.Contains(t, w, `hpcq_worker_slots{state="busy"} 0`)
}
