package executor

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/image/imagetest"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/schema"
)

// TestScaffold: the mount points a container needs are laid out once per
// image: a directory the image has keeps its mode, a path the image holds
// as something else is left to the sandbox; a container on it writes
// nothing into its layer for them, and still gets its mounts.
func TestScaffold(t *testing.T) {
	e := sandboxed(t)
	root := testutil.BusyboxRoot(t, "hpcq-scaffold")
	require.NoError(t, os.Chmod(filepath.Join(root, "etc"), 0o750))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "elsewhere"), 0o755))
	require.NoError(t, os.Symlink("elsewhere", filepath.Join(root, "var")))
	dir := e.scaffold(root)
	require.NotEmpty(t, dir)
	require.Equal(t, dir, e.scaffold(root), "made once")
	fi, err := os.Stat(filepath.Join(dir, "etc"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o750), fi.Mode().Perm(), "the image's /etc as it is")
	require.NoDirExists(t, filepath.Join(dir, "var"), "the image's /var is a link: not shadowed")
	require.FileExists(t, filepath.Join(dir, "etc/resolv.conf"))
	require.DirExists(t, filepath.Join(dir, ".hpcq-old-root"))
	require.DirExists(t, filepath.Join(dir, e.cfg.RunsDir))

	sqfs := imagetest.SquashFS(t, testutil.BusyboxRoot(t, "hpcq-plain"))
	task := shellTask("scaffolded", `cat /proc/self/status | grep -c Pid > pids`, `test -d /etc && echo etc > etc`)
	task.Container = containerOf(sqfs)
	res, err := e.Execute(context.Background(), task, worker.Slot{})
	require.NoError(t, err)
	require.Nil(t, res.Error, "%+v", res.Error)
	require.Equal(t, "etc", wsFile(t, e, task, "etc"))
	require.NotEmpty(t, wsFile(t, e, task, "pids"), "/proc is mounted")
	require.Empty(t, res.Container.Layer, "the mount points are not written into the node's layer")
}

func containerOf(image string) *schema.Container { return &schema.Container{Image: image} }
