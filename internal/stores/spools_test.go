package stores_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/chdb"
	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/leakcheck"
	"github.com/hpcq/hpcq/internal/stores"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/memory/cluster"
	"github.com/hpcq/hpcq/pkg/results"
)

// TestMain: with HPCQ_SPOOL_HELPER set the binary plays a worker that
// spools and is then killed (spoolHelper); else it runs the tests and
// fails them if they leave goroutines running.
func TestMain(m *testing.M) {
	if dir := os.Getenv("HPCQ_SPOOL_HELPER"); dir != "" {
		if err := spoolHelper(dir); err != nil {
			fmt.Println("helper:", err)
			os.Exit(1)
		}
		return
	}
	leakcheck.Main(m)
}

// spoolHelper is worker HPCQ_SPOOL_HELPER_ID on spool directory dir: it
// holds its spools, opens its results sink and its memory store of run
// "r", says "open", and when told "write" on stdin (ClickHouse is stopped
// by then) writes a metric row and a recall event, says "written", and
// waits to be killed: both stay in its spools.
func spoolHelper(dir string) error {
	ctx := context.Background()
	s := config.Store{RedisURL: os.Getenv("HPCQ_REDIS_URL"), ClickHouseDSN: os.Getenv("HPCQ_CLICKHOUSE_DSN")}
	id := os.Getenv("HPCQ_SPOOL_HELPER_ID")
	release, err := stores.HoldSpools(dir, id)
	if err != nil {
		return err
	}
	defer func() { _ = release() }()
	sink, err := results.OpenClickHouse(ctx, results.ClickHouseOptions{DSN: s.ClickHouseDSN, SpoolDir: dir, Name: stores.ResultsSpoolName(id)})
	if err != nil {
		return err
	}
	st, err := cluster.Open(ctx, cluster.Options{Run: "r", RedisURL: s.RedisURL, ClickHouseDSN: s.ClickHouseDSN,
		SpoolDir: stores.MemorySpoolDir(dir, id)})
	if err != nil {
		return err
	}
	if _, err := st.Fork(ctx, memory.ForkParams{Branch: "n1"}); err != nil {
		return err
	}
	fmt.Println("open")
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() || in.Text() != "write" {
		return fmt.Errorf("want write, got %q", in.Text())
	}
	if err := sink.Write(ctx, results.Rows{Metrics: []results.Metric{{Run: "r", Node: "n1", Attempt: 1, Name: "adopted", Value: 7, TS: time.Now()}}}); err != nil {
		return err
	}
	if _, err := st.RecallAppend(ctx, memory.RecallAppendParams{Branch: "n1",
		Event: memory.RecallEvent{Kind: "phase_started", NodeID: "n1", Phase: "run", TS: time.Now()}}); err != nil {
		return err
	}
	fmt.Println("written")
	select {}
}

// spoolWorker is spoolHelper running in a child process.
type spoolWorker struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.Writer
	lines *bufio.Scanner
}

// startSpoolHelper starts spoolHelper as worker id on spool directory dir.
func startSpoolHelper(t *testing.T, dir string, s config.Store, id string) *spoolWorker {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "HPCQ_SPOOL_HELPER="+dir, "HPCQ_SPOOL_HELPER_ID="+id,
		"HPCQ_REDIS_URL="+s.RedisURL, "HPCQ_CLICKHOUSE_DSN="+s.ClickHouseDSN)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return &spoolWorker{t: t, cmd: cmd, stdin: stdin, lines: bufio.NewScanner(stdout)}
}

func (w *spoolWorker) expect(want string) {
	w.t.Helper()
	require.True(w.t, w.lines.Scan(), "the helper ended early")
	require.Equal(w.t, want, w.lines.Text())
}

// writeAndDie has the worker write (ClickHouse stopped) and kills it.
func (w *spoolWorker) writeAndDie() {
	w.t.Helper()
	_, err := fmt.Fprintln(w.stdin, "write")
	require.NoError(w.t, err)
	w.expect("written")
	require.NoError(w.t, w.cmd.Process.Kill())
	_ = w.cmd.Wait()
}

// TestAdoptSpools: a worker killed while ClickHouse was away leaves rows
// and memory writes in its spools; the next worker on the spool directory
// (another id) ships them and removes the spools; a spool whose worker
// runs is not touched, and a second worker with a running worker's id
// cannot start.
func TestAdoptSpools(t *testing.T) {
	ctx := context.Background()
	s, c := clusterStores(t)
	dir := t.TempDir()

	h := startSpoolHelper(t, dir, s, "dead")
	h.expect("open")

	// While the worker runs, its spools are its own.
	_, err := stores.HoldSpools(dir, "dead")
	require.ErrorIs(t, err, stores.ErrSpoolsHeld)
	require.ErrorContains(t, err, `worker id "dead"`)
	adopted, err := stores.AdoptSpools(ctx, s, dir, "self", testutil.Logger(t))
	require.NoError(t, err)
	require.Empty(t, adopted, "a running worker's spools are not adopted")

	c.Stop()
	h.writeAndDie()
	for _, p := range []string{filepath.Join(dir, "results-worker-dead.journal"), filepath.Join(dir, "memory-dead", "spool-r.journal")} {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		require.NotZero(t, fi.Size(), "%s holds what ClickHouse did not take", p)
	}

	c.Start()
	release, err := stores.HoldSpools(dir, "self")
	require.NoError(t, err)
	defer func() { _ = release() }()
	adopted, err = stores.AdoptSpools(ctx, s, dir, "self", testutil.Logger(t))
	require.NoError(t, err)
	require.Equal(t, []string{"dead"}, adopted)

	conn, err := chdb.Open(ctx, s.ClickHouseDSN)
	require.NoError(t, err)
	defer conn.Close()
	var metrics, events uint64
	require.NoError(t, conn.QueryRow(ctx, `SELECT count() FROM metrics FINAL WHERE run = 'r' AND name = 'adopted'`).Scan(&metrics))
	require.NoError(t, conn.QueryRow(ctx, `SELECT count() FROM recall_events FINAL WHERE run = 'r' AND branch = 'n1' AND kind = 'phase_started'`).Scan(&events))
	require.Equal(t, uint64(1), metrics, "the dead worker's metric row")
	require.Equal(t, uint64(1), events, "the dead worker's recall event, mirrored once")

	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	require.Equal(t, "worker-self.lock", strings.Join(names, ","), "the dead worker's spools and lock are gone")
	adopted, err = stores.AdoptSpools(ctx, s, dir, "self", testutil.Logger(t))
	require.NoError(t, err)
	require.Empty(t, adopted, "nothing left to adopt")

	// A dead worker's memory spool of a run whose memory was moved out of
	// Redis since (scheduler purge --memory) cannot be replayed: it is set
	// aside, kept as it was, once, and the next start finds nothing to do.
	// (Open refuses the run before it reads the spool.)
	spool := cluster.SpoolFile(stores.MemorySpoolDir(dir, "gone"), "p")
	require.NoError(t, os.MkdirAll(filepath.Dir(spool), 0o755))
	require.NoError(t, os.WriteFile(spool, []byte("the last writes\n"), 0o644))
	_, err = cluster.RemoveRun(ctx, cluster.Options{Run: "p", RedisURL: s.RedisURL}, "moved to /runs/p/memory/memory.sqlite")
	require.NoError(t, err)
	adopted, err = stores.AdoptSpools(ctx, s, dir, "self", testutil.Logger(t))
	require.NoError(t, err)
	require.Equal(t, []string{"gone"}, adopted)
	kept, err := os.ReadFile(filepath.Join(dir, stores.PurgedSpoolsDir, "gone-spool-p.journal"))
	require.NoError(t, err)
	require.Equal(t, "the last writes\n", string(kept))
	left, err = os.ReadDir(dir)
	require.NoError(t, err)
	names = names[:0]
	for _, e := range left {
		names = append(names, e.Name())
	}
	require.Equal(t, stores.PurgedSpoolsDir+",worker-self.lock", strings.Join(names, ","), "the gone worker's spool directory and lock are removed")
	adopted, err = stores.AdoptSpools(ctx, s, dir, "self", testutil.Logger(t))
	require.NoError(t, err)
	require.Empty(t, adopted, "nothing left to adopt")
}

// TestShipOwnSpools: a worker restarted with the id it had ships, at its
// start, the memory writes its spool kept from before (ClickHouse was away
// when it was killed), though it runs no task of that run; a spool of a
// run whose memory has left Redis since is set aside, once.
func TestShipOwnSpools(t *testing.T) {
	ctx := context.Background()
	s, c := clusterStores(t)
	dir := t.TempDir()
	log := testutil.Logger(t)
	h := startSpoolHelper(t, dir, s, "again")
	h.expect("open")
	c.Stop()
	h.writeAndDie()
	spool := cluster.SpoolFile(stores.MemorySpoolDir(dir, "again"), "r")
	fi, err := os.Stat(spool)
	require.NoError(t, err)
	require.NotZero(t, fi.Size(), "the spool holds what ClickHouse did not take")

	// The worker starts again while ClickHouse is still away: it tries
	// until ClickHouse is back.
	release, err := stores.HoldSpools(dir, "again")
	require.NoError(t, err)
	defer func() { _ = release() }()
	adopted, err := stores.AdoptSpools(ctx, s, dir, "again", log)
	require.NoError(t, err)
	require.Empty(t, adopted, "its own spools are not another's to adopt")
	rw := stores.RecallWriter(s, stores.MemorySpoolDir(dir, "again"), log)
	defer rw.Close()
	shipped := make(chan error, 1)
	go func() { shipped <- stores.ShipOwnSpoolsUntilDone(ctx, rw, dir, "again", 100*time.Millisecond, log) }()
	time.Sleep(time.Second) //nolint:forbidigo // several shipping periods pass with nothing to ship
	select {
	case err := <-shipped:
		t.Fatalf("shipped with ClickHouse away: %v", err)
	default:
	}
	c.Start()
	select {
	case err := <-shipped:
		require.NoError(t, err)
	case <-time.After(2 * time.Minute):
		t.Fatal("not shipped 2 minutes after ClickHouse came back")
	}
	conn, err := chdb.Open(ctx, s.ClickHouseDSN)
	require.NoError(t, err)
	defer conn.Close()
	var events uint64
	require.NoError(t, conn.QueryRow(ctx, `SELECT count() FROM recall_events FINAL WHERE run = 'r' AND branch = 'n1' AND kind = 'phase_started'`).Scan(&events))
	require.Equal(t, uint64(1), events, "the recall event spooled before the restart, mirrored once")
	fi, err = os.Stat(spool)
	require.NoError(t, err)
	require.Zero(t, fi.Size(), "the spool is shipped")

	// A run whose memory was moved out of Redis since (scheduler purge
	// --memory): its spool is set aside as it was.
	purged := cluster.SpoolFile(stores.MemorySpoolDir(dir, "again"), "p")
	require.NoError(t, os.WriteFile(purged, []byte("the last writes\n"), 0o644))
	_, err = cluster.RemoveRun(ctx, cluster.Options{Run: "p", RedisURL: s.RedisURL}, "moved to /runs/p/memory/memory.sqlite")
	require.NoError(t, err)
	require.NoError(t, stores.ShipOwnSpools(ctx, rw, dir, "again", log))
	kept, err := os.ReadFile(filepath.Join(dir, stores.PurgedSpoolsDir, "again-spool-p.journal"))
	require.NoError(t, err)
	require.Equal(t, "the last writes\n", string(kept))
	_, err = os.Stat(purged)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.NoError(t, stores.ShipOwnSpools(ctx, rw, dir, "again", log), "nothing left to do")
}
