package tests

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// openPTY is a new pseudo-terminal: what a program writes to slave is
// read from master, as a user's terminal would get it.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	master = os.NewFile(uintptr(fd), "ptmx")
	require.NoError(t, unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	require.NoError(t, err)
	slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { master.Close(); slave.Close() })
	return master, slave
}

// onTerminal runs a scheduler command with its output on a terminal and
// gives what the terminal received.
func onTerminal(t *testing.T, env []string, args ...string) string {
	t.Helper()
	return onTerminalCode(t, env, 0, args...)
}

// onTerminalCode is onTerminal of a command that exits with code.
func onTerminalCode(t *testing.T, env []string, code int, args ...string) string {
	t.Helper()
	master, slave := openPTY(t)
	cmd := exec.Command(filepath.Join(binDir, "scheduler"), args...)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, slave, slave
	require.NoError(t, cmd.Start())
	var got bytes.Buffer
	done := make(chan struct{})
	go func() { _, _ = io.Copy(&got, master); close(done) }()
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }() // the exit code is read below
	select {
	case <-waited:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-waited
	}
	slave.Close() // the master reads to its end (EIO) once no one holds the slave
	<-done
	require.Equal(t, code, cmd.ProcessState.ExitCode(), got.String())
	return got.String()
}

// TestLogsDoNotDriveTheTerminal: a node whose program prints escape
// sequences (OSC 52 writing the clipboard, OSC 0 retitling, CSI 2J
// clearing the screen) has its logs shown on a terminal with them made
// visible; --raw and a pipe get the bytes as they are.
func TestLogsDoNotDriveTheTerminal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	task := writeTask(t, dir, map[string]any{"v": 1, "node_id": "hostile", "attempt": 1, "pool": "cpu",
		"artifacts": map[string]any{"run": map[string]any{"commands": []string{
			`printf 'before\033]52;c;aGFja2Vk\007\033]0;pwned\007\033[2Jafter\n'`}}}})
	env := baseEnv(t, "HPCQ_RUNS_DIR="+filepath.Join(dir, "runs"))
	out, code := run(t, env, "scheduler", "exec", "--local", task)
	require.Equal(t, 0, code, out)
	runs, _ := filepath.Glob(filepath.Join(dir, "runs", "*", "run.json"))
	require.Len(t, runs, 1)
	runDir := filepath.Dir(runs[0])

	shown := onTerminal(t, env, "logs", "--run-dir", runDir, "--phase", "run", "hostile")
	require.NotContains(t, shown, "\x1b", "no escape sequence reached the terminal")
	require.NotContains(t, shown, "\x07")
	require.Contains(t, shown, "before^[]52;c;aGFja2Vk^G^[]0;pwned^G^[[2Jafter")

	raw := onTerminal(t, env, "logs", "--run-dir", runDir, "--phase", "run", "--raw", "hostile")
	require.Contains(t, raw, "\x1b]52;c;aGFja2Vk\x07", "--raw writes the bytes as they are")

	piped, code := run(t, env, "scheduler", "logs", "--run-dir", runDir, "--phase", "run", "hostile")
	require.Equal(t, 0, code, piped)
	require.True(t, strings.Contains(piped, "\x1b[2Jafter"), "a pipe gets the bytes as they are: %q", piped)

	// exec's summary shows a failed task's command, written by whoever
	// wrote the task (a model): an escape in it is made visible too.
	bad := writeTask(t, dir, map[string]any{"v": 1, "node_id": "bad", "attempt": 1, "pool": "cpu",
		"artifacts": map[string]any{"run": map[string]any{"commands": []string{"exit 3 # \x1b]0;pwned\x07\x1b[2J"}}}})
	shown = onTerminalCode(t, env, 1, "exec", "--local", bad)
	require.Contains(t, shown, "exit 3 # ^[]0;pwned^G^[[2J")
	require.NotContains(t, shown, "\x1b]0;")
}
