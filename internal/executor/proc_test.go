package executor

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/testutil"
)

func testEnv(t *testing.T) []string { return testutil.ShellEnv(t) }

func readPids(t *testing.T, dir string) []int {
	t.Helper()
	var pids []int
	for _, name := range []string{"parent.pid", "child.pid"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err, name)
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		require.NoError(t, err)
		pids = append(pids, pid)
	}
	return pids
}

func TestRunExitCodesAndOutput(t *testing.T) {
	var out, errb bytes.Buffer
	o, err := Run(context.Background(), Command{Env: testEnv(t), Line: "echo out; echo err >&2; exit 3", Stdout: &out, Stderr: &errb})
	require.NoError(t, err)
	require.Equal(t, 3, o.ExitCode)
	require.False(t, o.TimedOut)
	require.Equal(t, "out\n", out.String())
	require.Equal(t, "err\n", errb.String())

	o, err = Run(context.Background(), Command{Env: testEnv(t), Line: "kill -SEGV $$"})
	require.NoError(t, err)
	require.Equal(t, 128+int(syscall.SIGSEGV), o.ExitCode)

	_, err = Run(context.Background(), Command{Env: testEnv(t), Line: "true", Dir: "/does/not/exist"})
	require.ErrorIs(t, err, ErrStart)
}

func TestRunTimeoutKillsTheWholeGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The command forks a child and both sleep; the timeout must take both.
	line := "echo $$ > parent.pid; (echo $BASHPID > child.pid; exec sleep 1000) & sleep 1000"
	start := time.Now()
	o, err := Run(context.Background(), Command{Env: testEnv(t), Line: line, Dir: dir, Timeout: 300 * time.Millisecond, KillGrace: 200 * time.Millisecond})
	require.NoError(t, err)
	require.True(t, o.TimedOut)
	require.Less(t, time.Since(start), 30*time.Second)
	testutil.RequireGone(t, readPids(t, dir)...)
}

func TestRunTermIgnoredGetsKill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	line := "trap '' TERM; echo $$ > parent.pid; (trap '' TERM; echo $BASHPID > child.pid; while :; do sleep 0.05; done) & while :; do sleep 0.05; done"
	o, err := Run(context.Background(), Command{Env: testEnv(t), Line: line, Dir: dir, Timeout: 300 * time.Millisecond, KillGrace: 200 * time.Millisecond})
	require.NoError(t, err)
	require.True(t, o.TimedOut)
	testutil.RequireGone(t, readPids(t, dir)...)
}

func TestRunLeavesNothingBehindAfterExit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The command ends at once, leaving a background child that holds the
	// output pipe open.
	line := "echo $$ > parent.pid; (echo $BASHPID > child.pid; exec sleep 1000) & sleep 0.1; exit 0"
	start := time.Now()
	o, err := Run(context.Background(), Command{Env: testEnv(t), Line: line, Dir: dir})
	require.NoError(t, err)
	require.Equal(t, 0, o.ExitCode)
	require.Less(t, time.Since(start), 10*time.Second)
	testutil.RequireGone(t, readPids(t, dir)...)
}

func TestRunCanceled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	o, err := Run(ctx, Command{Env: testEnv(t), Line: "sleep 1000", KillGrace: time.Second})
	require.NoError(t, err)
	require.True(t, o.Canceled)
	require.False(t, o.TimedOut)
}

func TestRunHugeOutputStaysBounded(t *testing.T) {
	t.Parallel()
	c := NewCapture(64 << 10)
	// 200 MiB through a 64 KiB capture.
	o, err := Run(context.Background(), Command{Env: testEnv(t), Line: "head -c 209715200 /dev/zero | tr '\\0' 'x'; echo; echo THE-END", Stdout: c})
	require.NoError(t, err)
	require.Equal(t, 0, o.ExitCode)
	require.EqualValues(t, 200<<20+len("\nTHE-END\n"), c.Total())
	s := c.String()
	require.Less(t, len(s), 64<<10+100)
	require.Contains(t, s, "bytes dropped")
	require.True(t, strings.HasSuffix(s, "THE-END\n"))
}

func TestCapture(t *testing.T) {
	c := NewCapture(16) // 4 head, 12 tail
	_, _ = c.Write([]byte("abc"))
	require.Equal(t, "abc", c.String())
	_, _ = c.Write([]byte("defghijklmnop")) // 16 bytes total: all kept
	require.Equal(t, "abcdefghijklmnop", c.String())
	require.EqualValues(t, 0, c.Dropped())
	for _, b := range []byte("qrstuvwxyz") {
		_, _ = c.Write([]byte{b})
	}
	require.EqualValues(t, 26, c.Total())
	require.EqualValues(t, 10, c.Dropped())
	require.Equal(t, "abcd\n[... 10 bytes dropped ...]\nopqrstuvwxyz", c.String())
	require.Equal(t, "xyz", c.Tail(3))
	_, _ = c.Write(bytes.Repeat([]byte("Z"), 100))
	require.Equal(t, "abcd\n[... 110 bytes dropped ...]\n"+strings.Repeat("Z", 12), c.String())
}

func TestRunRlimits(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	o, err := Run(context.Background(), Command{Env: testEnv(t), Stdout: &out,
		Line:    "ulimit -v; ulimit -f; ulimit -n",
		Rlimits: Rlimits{AddressSpaceMB: 512, FileSizeMB: 2, OpenFiles: 64}})
	require.NoError(t, err)
	require.Equal(t, 0, o.ExitCode)
	require.Equal(t, "524288\n2048\n64\n", out.String())

	dir := t.TempDir()
	o, err = Run(context.Background(), Command{Env: testEnv(t), Dir: dir, Line: "head -c 3000000 /dev/zero > big",
		Rlimits: Rlimits{FileSizeMB: 1}})
	require.NoError(t, err)
	require.Equal(t, 128+int(syscall.SIGXFSZ), o.ExitCode, "writing past the file size limit gets SIGXFSZ")
}

func TestCaptureTail(t *testing.T) {
	for _, limit := range []int{16, 64, 1000} {
		for _, total := range []int{0, 5, 15, 16, 17, 63, 64, 65, 999, 1000, 1001, 5000} {
			c := NewCapture(limit)
			var all strings.Builder
			for i := range total {
				b := byte('a' + i%26)
				_, _ = c.Write([]byte{b})
				all.WriteByte(b)
			}
			full := c.String()
			for _, n := range []int{1, 3, 12, 16, 40, 2000} {
				want := full[max(0, len(full)-n):]
				require.Equal(t, want, c.Tail(n), "limit %d total %d n %d", limit, total, n)
			}
		}
	}
}
