// Package tests holds the process-level tests: the real scheduler and
// worker binaries against real NATS servers, killed and signalled as on a
// cluster.
package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/schema"
)

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hpcq-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cmd := exec.Command("go", "build", "-o", dir+"/", "../cmd/...")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build binaries:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a binary started by a test; it is killed (by its own pid) when
// the test ends, if it still runs.
type proc struct {
	cmd  *exec.Cmd
	out  *bytes.Buffer
	done chan struct{}
	err  error
}

func baseEnv(t *testing.T, extra ...string) []string { return testutil.ShellEnv(t, extra...) }

func start(t *testing.T, env []string, name string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, name), args...)
	cmd.Env = env
	p := &proc{cmd: cmd, out: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stdout = &syncWriter{b: p.out}
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.output())
		}
	})
	return p
}

func (p *proc) output() string {
	w := p.cmd.Stdout.(*syncWriter)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %v\n%s", p.cmd.Path, timeout, p.output())
		return -1
	}
}

func run(t *testing.T, env []string, name string, args ...string) (string, int) {
	t.Helper()
	p := start(t, env, name, args...)
	code := p.wait(t, 2*time.Minute)
	return p.output(), code
}

func writeTask(t *testing.T, dir string, task map[string]any) string {
	t.Helper()
	data, err := json.Marshal(task)
	require.NoError(t, err)
	path := filepath.Join(dir, task["node_id"].(string)+".json")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path
}

func runTask(node string, cmds ...string) *schema.NodeTask {
	return &schema.NodeTask{V: 1, RunID: "proc", NodeID: node, Attempt: 1, Pool: "cpu",
		Artifacts: schema.Artifacts{Run: schema.RunPhase{Commands: cmds}}}
}

func waitFile(t *testing.T, path string, timeout time.Duration) {
	t.Helper()
	testutil.Eventually(t, timeout, "file "+path, func() bool {
		_, err := os.Stat(path)
		return err == nil
	})
}

func readPids(t *testing.T, path string) []int {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		pid, err := strconv.Atoi(f)
		require.NoError(t, err)
		pids = append(pids, pid)
	}
	require.NotEmpty(t, pids)
	return pids
}

func forEachServer(t *testing.T, fn func(t *testing.T, srv *testutil.NATS)) {
	for _, kind := range testutil.ServerKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			fn(t, testutil.StartNATS(t, kind))
		})
	}
}

// TestWorkerKilledMidTask: SIGKILL a worker while it runs a task; the task
// comes back after AckWait, another worker completes it, and exactly one
// result reaches the scheduler side.
func TestWorkerKilledMidTask(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv *testutil.NATS) {
		ackWait := 2 * time.Second
		q := srv.Queue(t, queue.Options{AckWait: ackWait})
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		w, err := q.WatchRun(ctx, "proc", time.Now())
		require.NoError(t, err)
		defer w.Close()

		dirA, dirB := t.TempDir(), t.TempDir()
		env := func(id, dir string) []string {
			return baseEnv(t, "HPCQ_NATS_URL="+srv.URL, "HPCQ_ACK_WAIT="+ackWait.String(), "HPCQ_WORKER_ID="+id,
				"HPCQ_WORK_DIR="+dir, "HPCQ_SLOTS=1", "HPCQ_LOG_LEVEL=debug")
		}
		a := start(t, env("a", dirA), "worker")
		marker := fmt.Sprintf("hpcq-victim-%d-%d", os.Getpid(), time.Now().UnixNano())
		// On a the task's program would sleep for a minute, on b for 2 s.
		_, err = q.PublishTask(ctx, runTask("victim", "touch started; n=2; case $HPCQ_WORKSPACE in "+dirA+"/*) n=60;; esac; "+
			"(exec -a "+marker+":$HPCQ_WORKSPACE sleep $n); echo finished by $HPCQ_NODE_ID"))
		require.NoError(t, err)
		waitFile(t, filepath.Join(dirA, "proc/workspaces/victim/1/started"), 30*time.Second)
		aTask := marker + ":" + filepath.Join(dirA, "proc/workspaces/victim/1")
		testutil.Eventually(t, 10*time.Second, "a's task running", func() bool { return len(testutil.ProcessesWith(aTask)) == 1 })
		require.NoError(t, a.cmd.Process.Signal(syscall.SIGKILL))
		a.wait(t, 10*time.Second)
		killed := time.Now()
		// The sandbox dies with its worker: nothing of a's task runs on.
		testutil.RequireNoProcessWith(t, aTask)

		start(t, env("b", dirB), "worker")
		var got []*schema.NodeResult
		select {
		case r := <-w.Results:
			got = append(got, r)
		case <-ctx.Done():
			t.Fatal("no result after the worker was killed")
		}
		t.Logf("result %v after the kill (AckWait %v)", time.Since(killed).Round(time.Millisecond), ackWait)
		require.Equal(t, "b", got[0].Worker)
		require.True(t, got[0].OK(), "%+v", got[0].Error)
		require.Contains(t, got[0].Phases[len(got[0].Phases)-1].LogTail, "finished by victim")
		select {
		case r := <-w.Results:
			t.Fatalf("a second result for the same attempt: %+v", r)
		case <-time.After(2 * ackWait):
		}
		stats, err := q.Stats(ctx)
		require.NoError(t, err)
		require.Len(t, stats, 1)
		require.Zero(t, stats[0].Pending+stats[0].InFlight+stats[0].DeadLettered)
	})
}

// TestWorkerSIGTERMDrain: a worker told to stop hands its running task back
// at once; another worker picks it up well before AckWait, and the drained
// worker's processes are gone.
func TestWorkerSIGTERMDrain(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv *testutil.NATS) {
		q := srv.Queue(t, queue.Options{AckWait: time.Minute})
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		dirA, dirB := t.TempDir(), t.TempDir()
		env := func(id, dir string) []string {
			return baseEnv(t, "HPCQ_NATS_URL="+srv.URL, "HPCQ_WORKER_ID="+id, "HPCQ_WORK_DIR="+dir, "HPCQ_SLOTS=1", "HPCQ_KILL_GRACE=1s")
		}
		a := start(t, env("a", dirA), "worker")
		// The task's pids are those of its sandbox's namespace: its
		// processes are found by a marker in their command lines.
		marker := fmt.Sprintf("hpcq-drain-%d-%d", os.Getpid(), time.Now().UnixNano())
		_, err := q.PublishTask(ctx, runTask("long", "echo $$ > pids; (echo $BASHPID >> pids; exec -a "+marker+":$HPCQ_WORKSPACE sleep 1000) & exec -a "+marker+":$HPCQ_WORKSPACE sleep 1000"))
		require.NoError(t, err)
		pidFile := filepath.Join(dirA, "proc/workspaces/long/1/pids")
		testutil.Eventually(t, 30*time.Second, "task started on a", func() bool {
			data, _ := os.ReadFile(pidFile)
			return len(strings.Fields(string(data))) == 2
		})
		start(t, env("b", dirB), "worker")
		testutil.Eventually(t, 30*time.Second, "worker b registered", func() bool {
			ws, err := q.Workers(ctx)
			require.NoError(t, err)
			return len(ws) == 2
		})

		require.Len(t, testutil.ProcessesWith(marker+":"+filepath.Dir(pidFile)), 2, "a's task processes, found by their marker")
		t0 := time.Now()
		require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))
		bStarted := filepath.Join(dirB, "proc/workspaces/long/1/pids")
		waitFile(t, bStarted, 30*time.Second)
		pickup := time.Since(t0)
		t.Logf("task picked up by b %v after SIGTERM to a (AckWait 1m)", pickup.Round(time.Millisecond))
		require.Less(t, pickup, 30*time.Second, "handed back, not redelivered after AckWait")
		require.Equal(t, 0, a.wait(t, 30*time.Second), "a drained worker exits 0")
		require.Contains(t, a.output(), "task handed back (drain)")
		testutil.RequireNoProcessWith(t, marker+":"+filepath.Dir(pidFile)) // a's; b runs the task now
	})
}

// TestTimeoutKillsTaskAndChildren: through the scheduler CLI in local mode,
// a task that runs `sleep 1000` with a forked child is killed at its
// timeout and leaves no process behind.
func TestTimeoutKillsTaskAndChildren(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := fmt.Sprintf("hpcq-sleeper-%d-%d", os.Getpid(), time.Now().UnixNano())
	task := writeTask(t, dir, map[string]any{
		"v": 1, "node_id": "sleeper",
		"artifacts": map[string]any{"run": map[string]any{"commands": []string{
			"echo $$ > pids; (echo $BASHPID >> pids; exec -a " + marker + " sleep 1000) & exec -a " + marker + " sleep 1000"}}},
		"limits": map[string]any{"run_timeout_s": 1},
	})
	runs := filepath.Join(dir, "runs")
	out, code := run(t, baseEnv(t, "HPCQ_KILL_GRACE=1s"), "scheduler", "exec", "--local", "--runs-dir", runs, task)
	require.Equal(t, 1, code, out)
	require.Regexp(t, `sleeper\s+1\s+failed\s+.*timeout in run`, out)
	matches, err := filepath.Glob(filepath.Join(runs, "*", "workspaces", "sleeper", "1", "pids"))
	require.NoError(t, err)
	require.Len(t, matches, 1)
	require.Len(t, readPids(t, matches[0]), 2, "both processes started")
	testutil.RequireNoProcessWith(t, marker)
	// (that the marker finds a task's processes is checked in TestWorkerSIGTERMDrain)
}

// TestExecLocalExamples runs the bundled examples as `make run` does.
func TestExecLocalExamples(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not found: the OpenMP example compiles C code")
	}
	t.Parallel()
	runs := t.TempDir()
	out, code := run(t, baseEnv(t), "scheduler", "exec", "--local", "--workers", "2", "--slots", "1", "--runs-dir", runs,
		"../examples/hello/task.json", "../examples/stencil-omp/task.json")
	require.Equal(t, 0, code, out)
	require.Regexp(t, `hello\s+1\s+ok\s+\S+\s+run=0`, out)
	require.Regexp(t, `stencil-omp\s+1\s+ok\s+\S+\s+compile=0 run=0\s+local-\d\s+gflops=\S+ threads=\d time_s=\S+`, out)

	entries, err := os.ReadDir(runs)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	runDir := filepath.Join(runs, entries[0].Name())
	log, err := os.ReadFile(filepath.Join(runDir, "phase_logs", "node_stencil-omp", "run.log"))
	require.NoError(t, err)
	require.Contains(t, string(log), "METRIC gflops=")
	runJSON, err := os.ReadFile(filepath.Join(runDir, "run.json"))
	require.NoError(t, err)
	require.Contains(t, string(runJSON), `"mode": "local"`)
	res, err := os.ReadFile(filepath.Join(runDir, "results.jsonl"))
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(string(res), `"status":"ok"`))

	out, code = run(t, baseEnv(t), "scheduler", "status", "--run-dir", runDir)
	require.Equal(t, 0, code, out)
	require.Regexp(t, `cpu\s+0\s+0\s+0\s+0\s+0`, out)

	// The results, with the real sqlite3 CLI and with `scheduler query`.
	testutil.RequireBinary(t, "sqlite3", "scripts/services.sh install sqlite3")
	db := filepath.Join(runDir, "hpcq.sqlite")
	cli, err := exec.Command("sqlite3", "-readonly", db,
		"SELECT node, phase, status, compiler FROM phase_runs ORDER BY node, phase;"+
			"SELECT node, status, metric_name, metric_value > 0 FROM nodes ORDER BY node;"+
			"SELECT status, mode FROM runs;"+
			"SELECT COUNT(*) FROM metrics WHERE node = 'stencil-omp' AND name IN ('gflops', 'threads', 'time_s') AND run = '"+entries[0].Name()+"';").CombinedOutput()
	require.NoError(t, err, string(cli))
	require.Equal(t, "hello|coding|ok|\nhello|run|ok|\nstencil-omp|coding|ok|gcc\nstencil-omp|compile|ok|gcc\nstencil-omp|run|ok|gcc\n"+
		"hello|ok|greeting_chars|1\nstencil-omp|ok|gflops|1\ndone|local\n3\n", string(cli))
	out, code = run(t, baseEnv(t), "scheduler", "query", "--runs-dir", runs, "--format", "csv",
		"SELECT compiler, COUNT(*) AS phases FROM phase_runs WHERE compiler <> '' GROUP BY compiler")
	require.Equal(t, 0, code, out)
	require.Equal(t, "compiler,phases\ngcc,3\n", out)
	out, code = run(t, baseEnv(t), "scheduler", "query", "--run-dir", runDir, "--format", "json", "SELECT node FROM nodes ORDER BY node")
	require.Equal(t, 0, code, out)
	require.JSONEq(t, `[{"node":"hello"},{"node":"stencil-omp"}]`, out)
	out, code = run(t, baseEnv(t), "scheduler", "query", "--run-dir", runDir, "SELECT nope FROM nodes")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "no such column: nope")
	require.Contains(t, out, "query: SELECT nope FROM nodes")

	// `scheduler query` only reads: what once emptied a table is refused and
	// the rows are still there.
	out, code = run(t, baseEnv(t), "scheduler", "query", "--run-dir", runDir, "ATTACH DATABASE '"+db+"' AS w; DELETE FROM w.nodes")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "query refused: one statement per call")
	out, code = run(t, baseEnv(t), "scheduler", "query", "--run-dir", runDir, "WITH x AS (SELECT 1) DELETE FROM nodes")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "the database refused a write")
	out, code = run(t, baseEnv(t), "scheduler", "query", "--run-dir", runDir, "--timeout", "300ms",
		"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "the query ran out of time")
	out, code = run(t, baseEnv(t), "scheduler", "query", "--run-dir", runDir, "--format", "csv", "SELECT count(*) AS n FROM nodes")
	require.Equal(t, 0, code, out)
	require.Equal(t, "n\n2\n", out)
}

// TestHostileTaskCannotKillTheScheduler: a task whose run command kills
// every process it may signal (`kill -9 -1`, pkill) leaves `scheduler exec
// --local` (the scheduler with its in-process worker) alive to report it.
// The scheduler runs inside a PID namespace of the test's own, so that a
// sandbox failure could only reach that namespace.
func TestHostileTaskCannotKillTheScheduler(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the outer PID namespace of this test needs root (unshare --pid)")
	}
	testutil.RequireBinary(t, "unshare", "util-linux")
	t.Parallel()
	dir := t.TempDir()
	task := writeTask(t, dir, map[string]any{
		"v": 1, "node_id": "hostile",
		"artifacts": map[string]any{"run": map[string]any{"commands": []string{
			"kill -9 -1; echo still here", "pkill -9 -f 'sched[u]ler'; pkill -9 -f 'work[e]r'; pkill -9 -f 'uns[h]are'; true"}}},
	})
	runs := filepath.Join(dir, "runs")
	// sh is the namespace's first process (which signals from inside cannot
	// kill), so the scheduler is as exposed as on a machine: with
	// HPCQ_ISOLATION=off this same task kills it (exit 137).
	cmd := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "/bin/sh", "-c", `"$@"; echo "scheduler exit: $?"`, "sh",
		filepath.Join(binDir, "scheduler"), "exec", "--local", "--runs-dir", runs, task)
	cmd.Env = baseEnv(t)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), "scheduler exit: 0")
	require.Regexp(t, `hostile\s+1\s+ok`, string(out))
	logs, err := filepath.Glob(filepath.Join(runs, "*", "phase_logs", "node_hostile", "run.log"))
	require.NoError(t, err)
	require.Len(t, logs, 1)
	data, err := os.ReadFile(logs[0])
	require.NoError(t, err)
	require.Contains(t, string(data), "still here")
}

// TestResultsInClickHouse: a cluster run (nats-server, a worker process and
// the scheduler, all with HPCQ_CLICKHOUSE_DSN) leaves its rows in a real
// clickhouse-server, read back with clickhouse-client and `scheduler query`.
func TestResultsInClickHouse(t *testing.T) {
	t.Parallel()
	testutil.RequireBinary(t, "clickhouse-client", "scripts/services.sh install clickhouse")
	srv := testutil.StartNATS(t, "nats-server")
	ch := testutil.StartService(t, "clickhouse")
	dsn, port := ch.Env["HPCQ_CLICKHOUSE_DSN"], ch.Env["HPCQ_CLICKHOUSE_TCP_PORT"]
	env := baseEnv(t, "HPCQ_NATS_URL="+srv.URL, "HPCQ_CLICKHOUSE_DSN="+dsn)
	start(t, append(env, "HPCQ_WORK_DIR="+t.TempDir(), "HPCQ_WORKER_ID=w1", "HPCQ_SPOOL_DIR="+t.TempDir()), "worker", "--slots", "2")
	dir := t.TempDir()
	ok := writeTask(t, dir, map[string]any{"v": 1, "node_id": "ok", "artifacts": map[string]any{
		"compile": map[string]any{"commands": []string{"cc --version >/dev/null"}},
		"run":     map[string]any{"commands": []string{"echo METRIC speed=42"}}}})
	bad := writeTask(t, dir, map[string]any{"v": 1, "node_id": "bad", "artifacts": map[string]any{
		"compile": map[string]any{"commands": []string{"cc -c missing.c"}}}})
	out, code := run(t, append(env, "HPCQ_SPOOL_DIR="+t.TempDir()), "scheduler", "exec", "--runs-dir", filepath.Join(dir, "runs"), "--timeout", "60s", ok, bad)
	require.Equal(t, 1, code, out)
	runJSON, err := filepath.Glob(filepath.Join(dir, "runs", "*", "run.json"))
	require.NoError(t, err)
	require.Len(t, runJSON, 1)
	runID := filepath.Base(filepath.Dir(runJSON[0]))
	data, err := os.ReadFile(runJSON[0])
	require.NoError(t, err)
	require.Contains(t, string(data), `"store": "clickhouse"`)

	client := func(q string) string {
		out, err := exec.Command("clickhouse-client", "--host", "127.0.0.1", "--port", port, "--query", q).CombinedOutput()
		require.NoError(t, err, string(out))
		return string(out)
	}
	// The worker's rows are in once it has answered (its sink ships within a
	// second, a table after another: phase_runs, then metrics).
	testutil.Eventually(t, 30*time.Second, "the worker's rows in ClickHouse", func() bool {
		return client("SELECT count() FROM phase_runs FINAL WHERE run = '"+runID+"'") == "5\n" &&
			client("SELECT count() FROM metrics FINAL WHERE run = '"+runID+"'") == "1\n"
	})
	require.Equal(t, "bad\tcoding\tok\tcc\t\nbad\tcompile\tfailed\tcc\tcompile_failed\nok\tcoding\tok\tcc\t\nok\tcompile\tok\tcc\t\n",
		client("SELECT node, phase, status, compiler, error_kind FROM phase_runs FINAL WHERE run = '"+runID+"' AND phase <> 'run' ORDER BY node, phase"))
	require.Equal(t, "ok\tspeed\t42\n", client("SELECT node, name, value FROM metrics FINAL WHERE run = '"+runID+"'"))
	require.Equal(t, "bad\tfailed\nok\tok\n", client("SELECT node, status FROM nodes FINAL WHERE run = '"+runID+"' ORDER BY node"))
	testutil.Eventually(t, 30*time.Second, "the run's final row", func() bool {
		return client("SELECT status FROM runs FINAL WHERE run = '"+runID+"'") == "failed\n"
	})

	out, code = run(t, env, "scheduler", "query", "--run", runID, "--format", "csv",
		"SELECT compiler, countIf(status = 'failed') / count() AS failure_rate FROM phase_runs WHERE phase = 'compile' GROUP BY compiler")
	require.Equal(t, 0, code, out)
	require.Equal(t, "compiler,failure_rate\ncc,0.5\n", out, "the run's rows only, FINAL, without saying so")
	out, code = run(t, env, "scheduler", "query", "SELECT count() FROM nodes")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "ClickHouse holds many runs: name one (--run-dir DIR, or --run ID), or ask for every run with --all-runs")
	out, code = run(t, env, "scheduler", "query", "--all-runs", "SELECT nope FROM nodes")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "nope")
	require.Contains(t, out, "query: SELECT nope FROM nodes")
}

// TestExecAgainstExternalServer: scheduler and workers as separate
// processes on a server of each kind; a poison message on the side ends on
// the dead-letter subject and shows in `scheduler status`.
func TestExecAgainstExternalServer(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv *testutil.NATS) {
		env := baseEnv(t, "HPCQ_NATS_URL="+srv.URL)
		start(t, append(env, "HPCQ_WORK_DIR="+t.TempDir(), "HPCQ_WORKER_ID=w1"), "worker", "--slots", "2")
		dir := t.TempDir()
		ok := writeTask(t, dir, map[string]any{"v": 1, "node_id": "ok",
			"artifacts": map[string]any{"run": map[string]any{"commands": []string{"echo fine"}}}})
		bad := writeTask(t, dir, map[string]any{"v": 1, "node_id": "bad",
			"artifacts": map[string]any{"run": map[string]any{"commands": []string{"exit 3"}}}})
		out, code := run(t, env, "scheduler", "exec", "--runs-dir", filepath.Join(dir, "runs"), "--timeout", "60s", ok, bad)
		require.Equal(t, 1, code, out)
		runJSON, err := filepath.Glob(filepath.Join(dir, "runs", "*", "run.json"))
		require.NoError(t, err)
		require.Len(t, runJSON, 1)
		require.Regexp(t, `ok\s+1\s+ok\s+\S+\s+run=0\s+w1`, out)
		require.Regexp(t, `bad\s+1\s+failed\s+\S+\s+run=3\s+w1\s+-\s+run_failed in run: run command 1 \(exit 3\) exited with status 3`, out)

		nc := srv.Connect(t)
		_, err = nc.Request("hpcq.tasks.cpu.handmade", []byte("{not json"), 5*time.Second)
		require.NoError(t, err)
		testutil.Eventually(t, 30*time.Second, "the poison message to be dead-lettered", func() bool {
			out, code := run(t, env, "scheduler", "status")
			require.Equal(t, 0, code, out)
			return regexpMatch(`cpu\s+0\s+0\s+1\s+1\s+0`, out)
		})
		out, code = run(t, env, "scheduler", "status", "--json")
		require.Equal(t, 0, code, out)
		require.Contains(t, out, `"id":"w1"`)
	})
}

// TestCommandErrors: bad input gives a clear message and a non-zero exit.
func TestCommandErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := baseEnv(t)
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"v":1,"node_id":"x/y","artifacts":{"run":{"commands":["true"]}}}`), 0o644))
	out, code := run(t, env, "scheduler", "exec", "--local", "--runs-dir", dir, bad)
	require.Equal(t, 2, code, "invalid input")
	require.Contains(t, out, "bad.json: invalid message: node_id:")

	v2 := filepath.Join(dir, "v2.json")
	require.NoError(t, os.WriteFile(v2, []byte(`{"v":2,"node_id":"x"}`), 0o644))
	out, code = run(t, env, "scheduler", "exec", "--local", "--runs-dir", dir, v2)
	require.Equal(t, 2, code)
	require.Contains(t, out, "unknown version: v: 2 (this build reads version 1)")

	out, code = run(t, env, "scheduler", "exec", "--local", "--runs-dir", dir, filepath.Join(dir, "missing.json"))
	require.Equal(t, 2, code)
	require.Contains(t, out, "no such file")

	out, code = run(t, env, "scheduler", "run", filepath.Join(dir, "no-such-idea"))
	require.Equal(t, 2, code)
	require.Contains(t, out, "is not an idea directory")
	idea := filepath.Join(dir, "idea")
	require.NoError(t, os.MkdirAll(idea, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(idea, "run.yaml"), []byte("metric: {name: score}\nstagez: {}\n"), 0o644))
	out, code = run(t, env, "scheduler", "run", idea)
	require.Equal(t, 2, code)
	require.Contains(t, out, "field stagez not found")
	require.NoError(t, os.WriteFile(filepath.Join(idea, "run.yaml"), []byte("metric: {name: score}\n"), 0o644))
	out, code = run(t, env, "scheduler", "run", idea)
	require.Equal(t, 2, code)
	require.Contains(t, out, "idea: is required: idea.md in the idea directory")
	require.NoError(t, os.WriteFile(filepath.Join(idea, "idea.md"), []byte("an idea\n"), 0o644))
	out, code = run(t, env, "scheduler", "run", "--runs-dir", dir, idea)
	require.Equal(t, 1, code)
	require.Contains(t, out, "no model configured")
	out, code = run(t, env, "scheduler", "run", "--resume", dir)
	require.Equal(t, 2, code)
	require.Contains(t, out, "is not the directory of a `scheduler run`")
	out, code = run(t, env, "scheduler", "run", "--resume", dir, idea)
	require.Equal(t, 2, code)
	require.Contains(t, out, "usage: scheduler run")
	out, code = run(t, env, "scheduler", "export", "--run-dir", dir)
	require.Equal(t, 1, code)
	require.Contains(t, out, "is not the directory of a `scheduler run`")

	out, code = run(t, env, "scheduler", "query", "--runs-dir", dir, "--format", "yaml", "SELECT 1")
	require.Equal(t, 2, code)
	require.Contains(t, out, `--format "yaml": must be table, csv or json`)
	out, code = run(t, env, "scheduler", "query", "--run-dir", dir, "SELECT 1")
	require.Equal(t, 1, code)
	require.Contains(t, out, "is not a run directory")

	out, code = run(t, env, "scheduler", "frobnicate")
	require.Equal(t, 2, code)
	require.Contains(t, out, `unknown command "frobnicate"`)

	out, code = run(t, env, "worker")
	require.Equal(t, 2, code, "a usage error")
	require.Contains(t, out, "no NATS server: set HPCQ_NATS_URL or --nats-url")
	out, code = run(t, env, "worker", "--nats-url", "nats://127.0.0.1:1", "stray")
	require.Equal(t, 2, code)
	require.Equal(t, "worker: unexpected arguments [\"stray\"]\nusage: worker [flags] (-h for the flags)\n", out, "two lines, not the whole usage")
	out, code = run(t, env, "worker", "--no-such-flag")
	require.Equal(t, 2, code)
	require.Equal(t, "flag provided but not defined: -no-such-flag\nrun 'worker -h' for its usage\n", out)
	_, code = run(t, env, "slurm-bridge", "--no-such-flag")
	require.Equal(t, 2, code)
	_, code = run(t, env, "scheduler", "run", "--no-such-flag")
	require.Equal(t, 2, code)
	out, code = run(t, env, "scheduler", "run", "--resume", os.TempDir())
	require.Equal(t, 2, code)
	require.Contains(t, out, "has no run.json")
	require.NotContains(t, out, "<nil>")

	out, code = run(t, env, "slurm-bridge")
	require.Equal(t, 1, code)
	require.Contains(t, out, "HPCQ_NATS_URL (or --nats-url) is required")

	out, code = run(t, env, "worker", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, out, "HPCQ_NATS_URL")
}

// TestFailedStartLeavesNoRunDir: a run whose start fails (NATS unreachable,
// a Redis or ClickHouse that does not answer) exits non-zero with the
// reason and leaves no run directory that would pass for the newest run;
// go-redis's own complaints come out as the process's log lines.
func TestFailedStartLeavesNoRunDir(t *testing.T) {
	t.Parallel()
	testutil.RequireBinary(t, "clickhouse-server", "scripts/services.sh install clickhouse")
	idea := writeIdea(t, 1, 1)
	llm := draftsLLM(t, func(int) string { return runScript("echo score=1") })
	ch := testutil.StartService(t, "clickhouse")
	for name, c := range map[string]struct {
		env  []string
		want string
	}{
		"nats": {[]string{"HPCQ_NATS_URL=nats://127.0.0.1:1"}, "nats: no servers available"},
		"redis": {[]string{"HPCQ_NATS_URL=nats://127.0.0.1:1", "HPCQ_REDIS_URL=redis://127.0.0.1:1/0",
			"HPCQ_CLICKHOUSE_DSN=" + ch.Env["HPCQ_CLICKHOUSE_DSN"]}, "memory/cluster: redis at 127.0.0.1:1"},
		"clickhouse": {[]string{"HPCQ_NATS_URL=nats://127.0.0.1:1", "HPCQ_CLICKHOUSE_DSN=clickhouse://127.0.0.1:1/default"}, "clickhouse at 127.0.0.1:1"},
	} {
		t.Run(name, func(t *testing.T) {
			runs := t.TempDir()
			env := baseEnv(t, append([]string{"OPENAI_BASE_URL=" + llm.BaseURL(), "OPENAI_API_KEY=sk-test", "HPCQ_RUNS_DIR=" + runs,
				"HPCQ_SPOOL_DIR=" + t.TempDir()}, c.env...)...)
			out, code := run(t, env, "scheduler", "run", idea)
			require.NotEqual(t, 0, code, out)
			t.Logf("%s", out)
			require.Contains(t, out, c.want)
			entries, err := os.ReadDir(runs)
			require.NoError(t, err)
			require.Empty(t, entries, "no run directory is left behind:\n%s", out)
			for _, l := range strings.Split(out, "\n") {
				require.False(t, strings.HasPrefix(l, "redis: "), "a go-redis line outside the log: %s", l)
			}
		})
	}
}

// TestLocalModeReadsWorkerSettings: the in-process workers of a local run
// read the settings a worker process reads: the kill grace (a task that
// ignores SIGTERM outlives its timeout by the grace) and the output kept
// per stream.
func TestLocalModeReadsWorkerSettings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	task := writeTask(t, dir, map[string]any{
		"v": 1, "node_id": "settings",
		"artifacts": map[string]any{"run": map[string]any{"commands": []string{
			"head -c 5000 /dev/zero | tr '\\0' x; echo", "trap '' TERM; sleep 8; echo 'outlived the timeout'"}}},
		"limits": map[string]any{"run_timeout_s": 1},
	})
	runs := filepath.Join(dir, "runs")
	// A grace of 5 s (the default) would kill the second command at about
	// 6 s; with 10 minutes it ends on its own at 8 s.
	out, code := run(t, baseEnv(t, "HPCQ_KILL_GRACE=10m", "HPCQ_MAX_OUTPUT_BYTES=1000"), "scheduler", "exec", "--local", "--runs-dir", runs, task)
	require.Equal(t, 1, code, out)
	require.Regexp(t, `settings\s+1\s+failed\s+.*timeout in run`, out)
	logs, err := filepath.Glob(filepath.Join(runs, "*", "phase_logs", "node_settings", "run.log"))
	require.NoError(t, err)
	require.Len(t, logs, 1)
	data, err := os.ReadFile(logs[0])
	require.NoError(t, err)
	require.Contains(t, string(data), "outlived the timeout", "HPCQ_KILL_GRACE reached the in-process worker")
	require.Contains(t, string(data), "not kept in memory (max_output_bytes 1000 per stream)", "HPCQ_MAX_OUTPUT_BYTES reached it")
}
