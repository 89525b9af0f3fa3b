package executor

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/schema"
)

func TestParseUIDRange(t *testing.T) {
	first, n, err := parseUIDRange(" 200000-200063 ")
	require.NoError(t, err)
	require.Equal(t, 200000, first)
	require.Equal(t, 64, n)
	_, n, err = parseUIDRange("")
	require.NoError(t, err)
	require.Zero(t, n)
	for _, bad := range []string{"200000", "0-10", "500-600", "200-100", "x-y", "200000-100", "100000-300000", "2000-2147483647"} {
		_, _, err := parseUIDRange(bad)
		require.Error(t, err, bad)
	}
}

// slotUIDsExec is an executor whose slots have uids of their own (a
// worker running as root with a sandbox), or the test is skipped.
func slotUIDsExec(t *testing.T, uids string) *Executor {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a uid per slot is for a worker running as root")
	}
	t.Setenv("HOME", t.TempDir())
	e, err := NewExecutor(Config{RunsDir: t.TempDir(), KillGrace: 200 * time.Millisecond, Sandbox: SandboxConfig{UIDs: uids}})
	require.NoError(t, err)
	if e.sandbox == nil {
		t.Skip("no sandbox on this machine: " + e.Isolation())
	}
	return e
}

// TestSlotUIDs: with HPCQ_SANDBOX_UIDS each slot's task runs as a uid and
// group of its own, owns its 0700 workspace, and the result says so; a
// slot past the range runs as the sandbox user, and the result says why.
func TestSlotUIDs(t *testing.T) {
	e := slotUIDsExec(t, "300000-300003")
	require.Contains(t, e.Isolation(), "a uid per slot (300000-300003, HPCQ_SANDBOX_UIDS")
	task := func(node string) *schema.NodeTask {
		return &schema.NodeTask{V: 1, RunID: "r1", NodeID: node, Attempt: 1, Pool: "cpu", Artifacts: schema.Artifacts{
			Run: schema.RunPhase{Commands: []string{`echo METRIC uid=$(id -u); echo METRIC gid=$(id -g); echo METRIC groups=$(id -G | wc -w); echo METRIC mode=$(stat -c %a .)`}}}}
	}
	res := executeIn(t, e, task("s2"), worker.Slot{Index: 2}, time.Minute)
	require.Nil(t, res.Error)
	require.Equal(t, map[string]float64{"uid": 300002, "gid": 300002, "groups": 1, "mode": 700}, res.Metrics)
	require.Equal(t, "uid 300002, gid 300002 (the slot's own, HPCQ_SANDBOX_UIDS)", res.Isolation.User)
	var st unix.Stat_t
	require.NoError(t, unix.Stat(e.WorkspaceDir(task("s2")), &st))
	require.Equal(t, uint32(300002), st.Uid)
	require.Equal(t, uint32(0o700), st.Mode&0o7777)

	nobody, _, err := lookupUser("nobody")
	require.NoError(t, err)
	res = executeIn(t, e, task("s9"), worker.Slot{Index: 9}, time.Minute)
	require.Nil(t, res.Error)
	require.Equal(t, float64(nobody), res.Metrics["uid"])
	require.Contains(t, res.Isolation.Note, "slot 9 has no uid of its own (HPCQ_SANDBOX_UIDS holds 4)")
}

// TestForkBombBoundedByNproc: where no pids cgroup can be had, a slot's
// own uid carries the task's process limit as RLIMIT_NPROC: the fork bomb
// stops there and the result names the mechanism. (The cgroups this
// machine has are set aside for the test.)
func TestForkBombBoundedByNproc(t *testing.T) {
	e := slotUIDsExec(t, "300100-300101")
	e.v1, e.v2, e.v1Why, e.v2Why = nil, nil, "no cgroup v1 pids controller (set aside by the test)", ""
	task := &schema.NodeTask{V: 1, RunID: "r1", NodeID: "nproc", Attempt: 1, Pool: "cpu", Limits: schema.Limits{Pids: 64, RunTimeoutS: 3},
		Artifacts: schema.Artifacts{Run: schema.RunPhase{Commands: []string{"for i in $(seq 1 2000); do sleep 60 & done; wait"}}}}
	res := executeIn(t, e, task, worker.Slot{Index: 1}, time.Minute)
	require.NotNil(t, res.Error)
	require.Contains(t, res.Error.Message, "the task's process limit (limits.pids = 64, RLIMIT_NPROC of uid 300101) refused forks")
	require.Equal(t, 64, res.Limits.Pids)
	require.Equal(t, pidsByRlimit, res.Limits.PidsBy)
	require.Contains(t, res.Limits.Note, "process limit as RLIMIT_NPROC of the slot's own uid 300101 because no cgroup v1 pids controller")
	t.Log(res.Error.Message)

	// Without a uid of its own a task has no process limit there, and the
	// result says so (and how to get one).
	e.sandbox.slots = nil
	task.NodeID = "nolimit"
	task.Artifacts.Run.Commands = []string{"echo METRIC ok=1"}
	res = executeIn(t, e, task, worker.Slot{Index: 1}, time.Minute)
	require.Nil(t, res.Error)
	require.Zero(t, res.Limits.Pids)
	require.Contains(t, res.Limits.Note, "no process limit: no cgroup v1 pids controller (set aside by the test) (HPCQ_SANDBOX_UIDS gives each slot")
}
