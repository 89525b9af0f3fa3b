package tests

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/testutil"
)

// ranksC prints each rank's place; holdC records each rank's host and pid
// in the file argv[1] and holds the allocation while the file argv[2] is
// there; stencilC is a 1-D decomposed Jacobi sweep with halo exchanges.
const (
	ranksC = `#include <mpi.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r, n; char h[64];
    MPI_Comm_rank(MPI_COMM_WORLD, &r); MPI_Comm_size(MPI_COMM_WORLD, &n);
    gethostname(h, sizeof h);
    printf("rank %d of %d on %s\n", r, n, h);
    int sum = 0, one = 1;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (r == 0) printf("METRIC ranks=%d\n", sum);
    MPI_Finalize();
    return 0;
}
`
	holdC = `#include <mpi.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r, n; char h[64];
    MPI_Comm_rank(MPI_COMM_WORLD, &r); MPI_Comm_size(MPI_COMM_WORLD, &n);
    gethostname(h, sizeof h);
    FILE *o = fopen(argv[1], "a"); fprintf(o, "%d %s %d\n", r, h, (int)getpid()); fclose(o);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < 600 && access(argv[2], F_OK) == 0; i++) sleep(1);
    MPI_Barrier(MPI_COMM_WORLD);
    if (r == 0) printf("METRIC held_ranks=%d\n", n);
    MPI_Finalize();
    return 0;
}
`
	stencilC = `#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int r, p; MPI_Comm_rank(MPI_COMM_WORLD, &r); MPI_Comm_size(MPI_COMM_WORLD, &p);
    int n = 512, iters = 200, rows = n / p;
    double *a = calloc((size_t)(rows + 2) * n, sizeof *a), *b = calloc((size_t)(rows + 2) * n, sizeof *b);
    if (r == 0) for (int j = 0; j < n; j++) a[j] = b[j] = 1.0;
    int up = r > 0 ? r - 1 : MPI_PROC_NULL, down = r < p - 1 ? r + 1 : MPI_PROC_NULL;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int it = 0; it < iters; it++) {
        MPI_Sendrecv(a + n, n, MPI_DOUBLE, up, 0, a + (size_t)(rows + 1) * n, n, MPI_DOUBLE, down, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(a + (size_t)rows * n, n, MPI_DOUBLE, down, 1, a, n, MPI_DOUBLE, up, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int i = 1; i <= rows; i++)
            for (int j = 1; j < n - 1; j++)
                b[(size_t)i * n + j] = 0.25 * (a[(size_t)(i - 1) * n + j] + a[(size_t)(i + 1) * n + j] + a[(size_t)i * n + j - 1] + a[(size_t)i * n + j + 1]);
        double *t = a; a = b; b = t;
    }
    double s = MPI_Wtime() - t0, local = 0, sum = 0;
    for (int i = 1; i <= rows; i++) for (int j = 0; j < n; j++) local += a[(size_t)i * n + j];
    MPI_Reduce(&local, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (r == 0) printf("METRIC mlups=%.2f\nMETRIC ranks=%d\nMETRIC checksum=%.6e\n", (double)n * n * iters / s / 1e6, p, sum);
    MPI_Finalize();
    return 0;
}
`
)

// mpiTask is a task that compiles src with mpicc and runs it as ranks.
func mpiTask(node, src, args string, nodes, ranksPerNode int) map[string]any {
	return map[string]any{"v": 1, "node_id": node, "pool": "mpi",
		"artifacts": map[string]any{
			"coding":  map[string]any{"workspace": map[string]any{"files": []map[string]any{{"path": "prog.c", "content": src}}}},
			"compile": map[string]any{"commands": []string{"mpicc -O2 -o prog prog.c"}},
			"run":     map[string]any{"commands": []string{"$HPCQ_MPIRUN ./prog " + args}}},
		"limits": map[string]any{"nodes": nodes, "ranks_per_node": ranksPerNode, "run_timeout_s": 900}}
}

// TestMultiNodeMPI: slurm-bridge, run as a user (the jobs' owner: Slurm lets
// only it start their steps), submits a worker job of two nodes on two
// compute hosts; tasks of two nodes run their Open MPI ranks on both hosts
// through $HPCQ_MPIRUN, and a stencil's metric comes back per node count;
// a compute host killed while a task's ranks run fails the task cleanly (no
// rank left on the other host) and it runs again in a new allocation.
//
// Long: one scenario, its steps in order (the cluster up, three tasks, the
// fault and the recovery), each waiting on what the one before left.
func TestMultiNodeMPI(t *testing.T) {
	requireNetns(t)
	testutil.RequireBinary(t, "mpicc", "scripts/services.sh install mpi")
	testutil.RequireBinary(t, "nats-server", "scripts/services.sh install nats")
	t.Parallel()
	hosts := headAndComputes(t)
	head, compute2 := hosts[0], hosts[2]
	sl := startSlurmHosts(t, head, hosts[1], hosts[2])
	// The jobs' user reads Slurm's configuration and the binaries, and
	// writes the shared work directory (a file system every node sees).
	shared := t.TempDir()
	for _, d := range []string{filepath.Dir(shared), shared, sl.dir} {
		require.NoError(t, os.Chmod(d, 0o755))
	}
	dir := func(name string) string {
		d := filepath.Join(shared, name)
		require.NoError(t, os.MkdirAll(d, 0o777))
		require.NoError(t, os.Chmod(d, 0o777))
		return d
	}
	bin, work, logs, natsDir, holdDir := dir("bin"), dir("work"), dir("logs"), dir("nats"), dir("hold")
	for _, b := range []string{"worker", "hpcq-sandbox", "slurm-bridge"} {
		data, err := os.ReadFile(filepath.Join(binDir, b))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(bin, b), data, 0o755))
	}

	natsBin, err := exec.LookPath("nats-server")
	require.NoError(t, err)
	startOn(t, head, nil, natsBin, "-a", head.Addr, "-p", "4222", "-js", "-sd", natsDir)
	natsURL := "nats://" + head.Addr + ":4222"
	testutil.Eventually(t, 30*time.Second, "nats-server on the head host", func() bool {
		c, err := net.DialTimeout("tcp", head.Addr+":4222", time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	env := baseEnv(t, "HPCQ_NATS_URL="+natsURL, "HPCQ_ACK_WAIT=15s", "SLURM_CONF="+sl.env["SLURM_CONF"])
	tasks := t.TempDir()
	submit := func(ts ...map[string]any) *hostProc {
		var args []string
		for _, task := range ts {
			args = append(args, writeTask(t, tasks, task))
		}
		return startOn(t, head, env, "scheduler", append([]string{"exec", "--json", "--runs-dir", filepath.Join(tasks, "runs"), "--timeout", "8m"}, args...)...)
	}
	first := submit(mpiTask("ranks", ranksC, "", 2, 2), mpiTask("stencil-1", stencilC, "", 1, 2), mpiTask("stencil-2", stencilC, "", 2, 2))

	cfg := filepath.Join(shared, "bridge.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`name: multinode
interval: 1s
log_dir: %s
worker_bin: %s
queues:
  mpi:
    partition: debug
    nodes: 2
    cpus_per_task: 2
    max_jobs: 1
    backlog: 1
    idle_timeout: 10m
`, logs, filepath.Join(bin, "worker"))), 0o644))
	testutil.Eventually(t, time.Minute, "the scheduler's queue", func() bool { return strings.Contains(first.output(), "tasks published") })
	// Slurm's files are under /tmp here, which a task's sandbox covers with
	// its own (on a cluster /etc/slurm and /run/munge are not hidden): the
	// workers show them to their tasks.
	bridge := startOn(t, head, append(env, "HPCQ_WORK_DIR="+work, "HOME="+shared, "HPCQ_SANDBOX_WRITABLE="+sl.dir+","+holdDir), "/usr/bin/setpriv",
		"--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", filepath.Join(bin, "slurm-bridge"), "--config", cfg)
	jobLogs := func() string { return jobOutputs(logs) }
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("bridge:\n%s\nworker jobs:\n%s", bridge.output(), jobLogs())
		}
	})

	select {
	case <-first.Done:
	case <-time.After(6 * time.Minute):
		t.Fatalf("the first tasks did not finish:\n%s", first.output())
	}
	results := map[string]execLine{}
	for _, l := range execLines(t, first.output()) {
		results[l.Node] = l
	}
	require.Len(t, results, 3, first.output())
	ranks := results["ranks"]
	require.Equal(t, "ok", ranks.Status, first.output())
	log := ranks.runLog()
	for r := range 4 {
		require.Regexp(t, fmt.Sprintf(`rank %d of 4 on compute[12]`, r), log)
	}
	require.Contains(t, log, "on compute1")
	require.Contains(t, log, "on compute2", "ranks ran on both hosts")
	require.Regexp(t, `\[1,\d\]<stdout>:rank`, log, "each rank's output tagged with its rank")
	require.Equal(t, 4.0, ranks.Result.Metrics["ranks"])
	require.Equal(t, []string{"compute1", "compute2"}, ranks.Result.Limits.Hosts)
	require.Equal(t, 4, ranks.Result.Limits.Ranks)
	mlups := map[int]float64{}
	for nodes, node := range map[int]string{1: "stencil-1", 2: "stencil-2"} {
		l := results[node]
		require.Equal(t, "ok", l.Status, first.output())
		require.Equal(t, float64(2*nodes), l.Result.Metrics["ranks"])
		mlups[nodes] = l.Result.Metrics["mlups"]
	}
	require.Equal(t, results["stencil-1"].Result.Metrics["checksum"], results["stencil-2"].Result.Metrics["checksum"], "the same grid on 2 and 4 ranks")
	q, code := run(t, baseEnv(t), "scheduler", "query", "--runs-dir", filepath.Join(tasks, "runs"), "--format", "csv",
		"SELECT node, nodes, ranks FROM phase_runs WHERE phase = 'run' ORDER BY node")
	require.Equal(t, 0, code, q)
	require.Contains(t, q, "ranks,2,4\n")
	require.Contains(t, q, "stencil-1,1,0\n", "a task of one node: its ranks were not spread by hpcq")
	require.Contains(t, q, "stencil-2,2,4\n")

	// The fault: compute2 dies while the ranks of a task of two nodes run.
	rankFile, gate := filepath.Join(holdDir, "ranks.txt"), filepath.Join(holdDir, "gate")
	require.NoError(t, os.WriteFile(gate, nil, 0o644))
	hold := submit(mpiTask("hold", holdC, rankFile+" "+gate, 2, 2))
	ranksOf := func() []string {
		data, _ := os.ReadFile(rankFile)
		return strings.Fields(string(data))
	}
	testutil.Eventually(t, 3*time.Minute, "the 4 ranks running", func() bool { return len(ranksOf()) == 12 })
	first4 := ranksOf()
	require.Contains(t, first4, "compute2")
	jobs := sl.cmd(t, "squeue", "-h", "-t", "RUNNING", "-o", "%i")
	compute2.Kill()
	killedAt := time.Now()
	testutil.Eventually(t, 2*time.Minute, "the job of the killed host to end", func() bool {
		return !strings.Contains(sl.cmd(t, "squeue", "-h", "-t", "RUNNING", "-o", "%i"), jobs)
	})
	left := 0
	testutil.Eventually(t, 30*time.Second, "no rank of the first run left", func() bool {
		left = ranksAlive(first4)
		return left == 0
	})
	require.NoError(t, os.Remove(gate))
	sl.startNode(t, compute2)
	select {
	case <-hold.Done:
	case <-time.After(5 * time.Minute):
		t.Fatalf("the task of the killed host did not run again:\n%s", hold.output())
	}
	h := execLines(t, hold.output())
	require.Len(t, h, 1, hold.output())
	again := ranksOf()[12:]
	recovered := h[0].Status == "ok" && h[0].Result.Metrics["held_ranks"] == 4 && len(again) == 12 && slices.Contains(again, "compute2")
	require.True(t, recovered, "%+v\nranks: %v", h[0], ranksOf())
	require.Contains(t, jobLogs(), "the Slurm allocation lost a node", "the worker of the broken allocation drained")
	t.Logf("the task ran again %s after compute2 was killed; stencil: %.1f MLUP/s on 1 node (2 ranks), %.1f on 2 nodes (4 ranks)",
		time.Since(killedAt).Round(time.Second), mlups[1], mlups[2])
	resultLine(t, fmt.Sprintf("multinode hosts=%d ranks=%d tasks_ok=%d host_killed_recovered=%t ranks_left=%d",
		len(ranks.Result.Limits.Hosts), ranks.Result.Limits.Ranks, 4, recovered, left))
}

// resultLine prints a test's result line and appends it to the file
// HPCQ_TEST_LINES names (make test prints them after the run: go test shows
// a passing package's output only with -v).
func resultLine(t *testing.T, line string) {
	fmt.Println(line)
	if p := os.Getenv("HPCQ_TEST_LINES"); p != "" {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		require.NoError(t, err)
		_, err = fmt.Fprintln(f, line)
		require.NoError(t, errors.Join(err, f.Close()))
	}
}

// ranksAlive counts the processes of pids (rank host pid triples) that
// still run a program of the test: a rank left behind.
func ranksAlive(triples []string) int {
	n := 0
	for i := 2; i < len(triples); i += 3 {
		cmd, err := os.ReadFile("/proc/" + triples[i] + "/cmdline")
		if err == nil && strings.HasPrefix(string(cmd), "./prog") {
			n++
		}
	}
	return n
}

// execLine is one line of `scheduler exec --json`.
type execLine struct {
	Node   string `json:"node_id"`
	Status string `json:"status"`
	Result struct {
		Attempt int                `json:"attempt"`
		Metrics map[string]float64 `json:"metrics"`
		Phases  []struct {
			Name    string `json:"name"`
			LogTail string `json:"log_tail"`
			LogRef  string `json:"log_ref"`
		} `json:"phases"`
		Limits struct {
			Hosts []string `json:"hosts"`
			Ranks int      `json:"ranks"`
		} `json:"limits"`
	} `json:"result"`
}

// runLog is the run phase's whole log (its tail when the file is gone).
func (l execLine) runLog() string {
	for _, p := range l.Result.Phases {
		if p.Name == "run" {
			if data, err := os.ReadFile(p.LogRef); err == nil {
				return string(data)
			}
			return p.LogTail
		}
	}
	return ""
}

var jsonLine = regexp.MustCompile(`(?m)^\{"node_id".*$`)

func execLines(t *testing.T, out string) []execLine {
	t.Helper()
	var ls []execLine
	for _, s := range jsonLine.FindAllString(out, -1) {
		var l execLine
		require.NoError(t, json.Unmarshal([]byte(s), &l), s)
		ls = append(ls, l)
	}
	return ls
}
