package stores_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/executor"
	"github.com/hpcq/hpcq/internal/stores"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/memory/cluster"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// TestLocalStores: without servers, a run's memory and results are the
// SQLite files of its run directory, named in run.json's terms; a Redis URL
// alone is warned about, not half-used; an export reopens what run.json
// names and says what it needs when that is the cluster store.
func TestLocalStores(t *testing.T) {
	ctx := context.Background()
	dir := rundir.Dir(filepath.Join(t.TempDir(), "20261123-000000-aaaaaa"))
	require.NoError(t, os.MkdirAll(string(dir), 0o755))
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))

	mem, where, err := stores.OpenMemory(ctx, config.Store{RedisURL: "redis://127.0.0.1:1/0"}, dir, "", 0, log)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"enabled": "true", "store": stores.MemorySQLite, "file": rundir.MemoryDB, "half_life": "24h0m0s"}, where)
	require.Contains(t, logs.String(), "HPCQ_REDIS_URL is set without HPCQ_CLICKHOUSE_DSN")
	_, err = mem.Fork(ctx, memory.ForkParams{Branch: "root"})
	require.NoError(t, err)
	require.NoError(t, mem.Close())
	require.FileExists(t, dir.Path(rundir.MemoryDB))

	sink, where, err := stores.OpenResults(ctx, config.Store{}, dir, log)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"store": "sqlite", "file": rundir.ResultsFile}, where)
	require.NoError(t, sink.Write(ctx, results.Rows{Runs: []results.Run{{Run: dir.ID(), Status: schema.RunDone}}}))
	require.NoError(t, sink.Close())
	tab, err := results.QuerySQLite(ctx, dir.Path(rundir.ResultsFile), "SELECT status FROM runs")
	require.NoError(t, err)
	require.Equal(t, [][]any{{"done"}}, tab.Rows)

	again, err := stores.ReopenMemory(ctx, config.Store{}, dir, map[string]string{"store": stores.MemorySQLite}, log)
	require.NoError(t, err)
	_, err = again.BranchGet(ctx, "root")
	require.NoError(t, err, "the export sees what the run wrote")
	require.NoError(t, again.Close())
	none, err := stores.ReopenMemory(ctx, config.Store{}, dir, nil, log)
	require.NoError(t, err)
	require.Nil(t, none, "a run with memory off has none to reopen")
	_, err = stores.ReopenMemory(ctx, config.Store{}, dir, map[string]string{"store": stores.MemoryCluster}, log)
	require.ErrorContains(t, err, "set HPCQ_REDIS_URL and HPCQ_CLICKHOUSE_DSN")
}

// TestWorkerWritesRecallToRedis: a worker with the memory servers appends a
// node's phase events to its branch in Redis as each phase happens: they
// are readable there while the task still runs, before any result exists;
// the result says how many it stored and carries none back. Siblings of
// the node do not see them; its children do.
func TestWorkerWritesRecallToRedis(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not found: this test compiles C code")
	}
	ctx := context.Background()
	s, _ := clusterStores(t)
	log := testutil.Logger(t)
	run := "recall-run"
	// The scheduler's side: the run's store, the node's branch forked before the task is published.
	sched, err := cluster.Open(ctx, cluster.Options{Run: run, RedisURL: s.RedisURL, ClickHouseDSN: s.ClickHouseDSN, SpoolDir: t.TempDir(), Logger: log})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sched.Close() })
	for _, f := range [][2]string{{"root", ""}, {"n1", "root"}, {"n2", "root"}} {
		_, err := sched.Fork(ctx, memory.ForkParams{Branch: f[0], Parent: f[1]})
		require.NoError(t, err)
	}

	rw := stores.RecallWriter(s, filepath.Join(s.SpoolDir, "memory-w1"), log)
	require.NotNil(t, rw)
	t.Cleanup(func() { _ = rw.Close() })
	gate := filepath.Join(t.TempDir(), "gate")
	e, err := executor.NewExecutor(executor.Config{RunsDir: t.TempDir(), Sandbox: executor.SandboxConfig{Mode: "off"}, Recall: rw, Env: testutil.ShellEnv(t)})
	require.NoError(t, err)
	task := &schema.NodeTask{V: schema.Version, RunID: run, NodeID: "n1", BranchID: "n1", Attempt: 1, Pool: "cpu",
		Recall: &schema.TaskRecall{RedactSecrets: true},
		Artifacts: schema.Artifacts{
			Coding:  schema.CodingPhase{Workspace: schema.Workspace{Files: []schema.File{{Path: "m.c", Content: "#include <stdio.h>\nint main(void){printf(\"METRIC score=7\\n\");return 0;}\n"}}}},
			Compile: schema.CommandsPhase{Commands: []string{"gcc -o m m.c"}},
			Run:     schema.RunPhase{Commands: []string{"while [ ! -e " + gate + " ]; do sleep 0.05; done", "./m"}},
		}}
	type done struct {
		res *schema.NodeResult
		err error
	}
	ch := make(chan done, 1)
	go func() {
		res, err := e.Execute(ctx, task, worker.Slot{Cores: 1})
		ch <- done{res, err}
	}()
	kinds := func(branch string) []string {
		evs, _, err := sched.RecallList(ctx, memory.RecallListParams{Branch: branch, Limit: 100})
		require.NoError(t, err)
		var out []string
		for _, ev := range evs {
			out = append(out, ev.Kind+"/"+ev.Phase)
		}
		return out
	}
	testutil.Eventually(t, time.Minute, "the run phase's start in Redis", func() bool { return slices.Contains(kinds("n1"), "phase_started/run") })
	select {
	case d := <-ch:
		t.Fatalf("the task ended before the gate opened: %+v %v", d.res, d.err)
	default:
	}
	require.Equal(t, []string{"phase_complete/coding", "phase_started/compile", "phase_complete/compile", "phase_started/run"}, kinds("n1"),
		"the events are in Redis while the task runs, before any result")
	require.Empty(t, kinds("n2"), "a sibling does not see them")

	require.NoError(t, os.WriteFile(gate, nil, 0o644))
	d := <-ch
	require.NoError(t, d.err)
	require.Nil(t, d.res.Error)
	all := []string{"phase_complete/coding", "phase_started/compile", "phase_complete/compile", "phase_started/run", "execution_result/run", "metric_extracted/run"}
	// A write returns once it is in the store's spool; Redis has it a moment later.
	testutil.Eventually(t, 30*time.Second, "every event in Redis", func() bool { return slices.Equal(all, kinds("n1")) })
	require.Equal(t, 6, d.res.RecallStored)
	require.Empty(t, d.res.RecallPending, "nothing for the scheduler to store again")
	_, err = sched.Fork(ctx, memory.ForkParams{Branch: "n3", Parent: "n1"})
	require.NoError(t, err)
	require.Len(t, kinds("n3"), 6, "a child sees its parent's events")
}

// TestRecallWithoutServers: a worker without the memory servers stores
// nothing itself; every event comes back in the result, for the scheduler.
func TestRecallWithoutServers(t *testing.T) {
	require.Nil(t, stores.RecallWriter(config.Store{RedisURL: "redis://x"}, t.TempDir(), testutil.Logger(t)))
	e, err := executor.NewExecutor(executor.Config{RunsDir: t.TempDir(), Sandbox: executor.SandboxConfig{Mode: "off"}, Env: testutil.ShellEnv(t)})
	require.NoError(t, err)
	task := &schema.NodeTask{V: schema.Version, RunID: "r", NodeID: "n1", BranchID: "n1", Attempt: 1, Pool: "cpu",
		Recall:    &schema.TaskRecall{RedactSecrets: true},
		Artifacts: schema.Artifacts{Run: schema.RunPhase{Commands: []string{"echo METRIC score=3", "exit 2"}}}}
	res, err := e.Execute(context.Background(), task, worker.Slot{Cores: 1})
	require.NoError(t, err)
	require.Zero(t, res.RecallStored)
	var kinds []string
	for _, ev := range res.RecallPending {
		kinds = append(kinds, ev.Kind+"/"+ev.Phase)
	}
	require.Equal(t, []string{"phase_complete/coding", "phase_started/run", "error_encountered/run"}, kinds)
	require.Contains(t, res.RecallPending[2].Payload, "exit 2")
}

// clusterStores starts a Redis and a ClickHouse for t and returns settings
// that name them (spooling under a temporary directory) and the ClickHouse
// server, which tests stop and start again.
func clusterStores(t *testing.T) (config.Store, *testutil.Server) {
	t.Helper()
	r := testutil.StartService(t, "redis")
	c := testutil.StartService(t, "clickhouse")
	return config.Store{RedisURL: r.Env["HPCQ_REDIS_URL"], ClickHouseDSN: c.Env["HPCQ_CLICKHOUSE_DSN"], SpoolDir: t.TempDir()}, c
}
