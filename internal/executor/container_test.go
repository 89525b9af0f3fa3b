package executor

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/testutil"
)

// TestContainerCommand: a command with a Root runs in the image: its
// files, its shell, the image's PATH; the workspace at its own path and
// writable; /tmp writable and private; nothing of the host's file system
// but what is bound in; the image's tree itself never written; in one
// attempt's sandbox as in a command's own.
func TestContainerCommand(t *testing.T) {
	e := sandboxed(t)
	root := testutil.BusyboxRoot(t, "hpcq-container")
	hostOnly := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(hostOnly, "secret"), []byte("host"), 0o644))
	for _, session := range []bool{false, true} {
		ws := t.TempDir()
		require.NoError(t, os.Chmod(ws, 0o777))
		var stderr bytes.Buffer
		c := Command{Dir: ws, Env: append(os.Environ(), "PATH=/host/only/bin"), Sandbox: e.sandbox, Root: root, TmpMB: 16, Stderr: &stderr,
			Line: strings.Join([]string{
				`cat /etc/os-release > osr`,
				`echo "$PATH" > path`,
				`ls ` + hostOnly + ` > host 2>&1 || echo hidden > host`,
				`touch /etc/planted 2> /dev/null && echo wrote > etc || echo refused > etc`,
				`echo t > /tmp/t && cat /tmp/t > tmp`,
				`pwd > pwd`,
				`ls /proc | grep -c '^[0-9]' > nprocs`,
			}, "; ")}
		var out Outcome
		var err error
		if session {
			ss, serr := e.sandbox.openSession(c)
			require.NoError(t, serr)
			out, err = ss.run(context.Background(), c)
			ss.close()
		} else {
			out, err = Run(context.Background(), c)
		}
		require.NoError(t, err, stderr.String())
		require.Equal(t, 0, out.ExitCode, stderr.String())
		read := func(name string) string {
			data, err := os.ReadFile(filepath.Join(ws, name))
			require.NoError(t, err, name)
			return strings.TrimSpace(string(data))
		}
		require.Equal(t, "ID=hpcq-container", read("osr"), "the image's files")
		require.Equal(t, containerPath, read("path"), "the image's PATH, not the host's")
		require.Equal(t, "hidden", read("host"), "the host's file system is not seen")
		require.Equal(t, ws, read("pwd"), "the workspace at its own path")
		require.Equal(t, "t", read("tmp"))
		require.NoFileExists(t, filepath.Join(root, "etc/planted"), "the image's tree is never written")
		require.NoFileExists(t, filepath.Join(root, "tmp/t"))
		if os.Geteuid() == 0 {
			require.Equal(t, "refused", read("etc"), "nobody may not write the image's /etc")
		}
	}
}
