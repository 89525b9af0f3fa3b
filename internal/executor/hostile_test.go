package executor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/image/imagetest"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/schema"
)

// TestHostAsImageRefused: a task naming the host's root, a system
// directory or a directory outside the site's image directories as its
// image fails as the image's fault, with the rule, before anything runs.
func TestHostAsImageRefused(t *testing.T) {
	e := sandboxed(t)
	outside, err := os.MkdirTemp("", "hpcq-not-an-image-dir-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(outside) })
	require.NoError(t, os.MkdirAll(filepath.Join(outside, "bin"), 0o755))
	for ref, why := range map[string]string{
		"/":     "system directory",
		"/usr":  "system directory",
		outside: "HPCQ_IMAGE_DIRS",
	} {
		task := shellTask("host-root", `cat /root/.ssh/id_ed25519 > key || true`)
		task.Container = &schema.Container{Image: ref}
		res, err := e.Execute(context.Background(), task, worker.Slot{})
		require.NoError(t, err, ref)
		require.NotNil(t, res.Error, ref)
		require.Equal(t, schema.ErrKindImage, res.Error.Kind, ref)
		require.Contains(t, res.Error.Message, why, ref)
		for _, ph := range res.Phases {
			require.Equal(t, schema.PhaseCoding, ph.Name, "%s: no command ran", ref)
		}
	}
}

// TestSealReadsNoTaskLink: a task that makes its layer's dpkg status a
// link to a root-only file of the host gets nothing of it into what its
// layer holds (prompts, dashboard); one that makes it a FIFO does not hold
// the slot.
func TestSealReadsNoTaskLink(t *testing.T) {
	e := sandboxed(t)
	secretDir, err := os.MkdirTemp("", "hpcq-secret-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(secretDir) })
	secret := filepath.Join(secretDir, "shadow")
	require.NoError(t, os.WriteFile(secret, []byte("Package: host-secret\nStatus: install ok installed\nVersion: 6.6.6\n\n"), 0o600))
	sqfs := imagetest.SquashFS(t, testutil.BusyboxRoot(t, "hpcq-link"))

	task := shellTask("link", `/bin/busybox mkdir -p /var/lib/dpkg /opt/x`, `echo x > /opt/x/f`, `/bin/busybox ln -s `+secret+` /var/lib/dpkg/status`)
	task.Container = &schema.Container{Image: sqfs}
	res, err := e.Execute(context.Background(), task, worker.Slot{})
	require.NoError(t, err)
	require.Nil(t, res.Error, "%+v", res.Error)
	require.NotContains(t, res.Container.LayerHolds, "host-secret", "the worker followed the task's link as root")
	require.Contains(t, res.Container.LayerHolds, "/opt/x", "the rest of the layer is read")

	fifo := shellTask("fifo", `/bin/busybox mkdir -p /var/lib/dpkg /opt/y`, `echo y > /opt/y/f`, `/bin/busybox mkfifo /var/lib/dpkg/status`)
	fifo.Container = &schema.Container{Image: sqfs}
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err = e.Execute(context.Background(), fifo, worker.Slot{})
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("a FIFO in the layer held the slot")
	}
	require.NoError(t, err)
	require.Nil(t, res.Error, "%+v", res.Error)
	require.Contains(t, res.Container.LayerHolds, "/opt/y")
}

// TestTamperedImageRefused: an OCI layout whose layer blob was edited in
// place after the run pinned its manifest digest fails the task as the
// image's fault, naming the blob; the commands never run in it.
func TestTamperedImageRefused(t *testing.T) {
	e := sandboxed(t)
	layout := imagetest.OCILayout(t, imagetest.OCIImage(t, testutil.BusyboxRoot(t, "pinned")))
	pin := shellTask("pin", `true`)
	pin.Container = &schema.Container{Image: layout}
	res, err := e.Execute(context.Background(), pin, worker.Slot{})
	require.NoError(t, err)
	require.Nil(t, res.Error, "%+v", res.Error)
	digest := res.Container.Digest

	// Another worker (its own cache) after the blob was changed.
	other := sandboxed(t)
	victim := imagetest.LargestBlob(t, layout)
	path := filepath.Join(layout, "blobs/sha256", victim)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	data[len(data)/2] ^= 0xff
	require.NoError(t, os.WriteFile(path, data, 0o644))
	task := shellTask("tampered", `echo ran > ran`)
	task.Container = &schema.Container{Image: layout, Digest: digest}
	res, err = other.Execute(context.Background(), task, worker.Slot{})
	require.NoError(t, err)
	require.NotNil(t, res.Error)
	require.Equal(t, schema.ErrKindImage, res.Error.Kind)
	require.Contains(t, res.Error.Message, "sha256:"+victim)
	require.True(t, strings.Contains(res.Error.Message, layout), res.Error.Message)
	require.NoFileExists(t, filepath.Join(other.WorkspaceDir(task), "ran"))
}

// TestImageErrorNamesTheTaskImage: an image named through a link that
// fails to unpack is named in the error as the task named it.
func TestImageErrorNamesTheTaskImage(t *testing.T) {
	e := sandboxed(t)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.sqfs")
	require.NoError(t, os.WriteFile(garbage, append([]byte("hsqs"), make([]byte, 4096)...), 0o644))
	link := filepath.Join(dir, "current.sqfs")
	require.NoError(t, os.Symlink(garbage, link))
	task := shellTask("named", `true`)
	task.Container = &schema.Container{Image: link}
	res, err := e.Execute(context.Background(), task, worker.Slot{})
	require.NoError(t, err)
	require.NotNil(t, res.Error)
	require.Equal(t, schema.ErrKindImage, res.Error.Kind)
	require.Contains(t, res.Error.Message, link)
	require.Contains(t, res.Error.Message, "unsquashfs")
}
