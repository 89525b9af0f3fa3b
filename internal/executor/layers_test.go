package executor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/image/imagetest"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/schema"
)

// TestLayersTravel: a node's writes over its image come back as its
// layer; its child, run on another worker (another image cache) that
// shares the object store, starts from it; a layer over the cap is kept
// on its worker but not shared, and a child elsewhere starts from the
// image with a note saying why; a node that writes nothing leaves none.
func TestLayersTravel(t *testing.T) {
	q := testutil.StartNATS(t, "embedded").Queue(t, queue.Options{})
	store, err := q.Layers(context.Background())
	require.NoError(t, err)
	image := imagetest.SquashFS(t, testutil.BusyboxRoot(t, "hpcq-layers"))
	worker1, worker2 := layerWorker(t, store, 1), layerWorker(t, store, 1)
	run := func(e *Executor, node string, layers []string, lines ...string) *schema.NodeResult {
		task := shellTask(node, lines...)
		task.Container = &schema.Container{Image: image, Layers: layers}
		res, err := e.Execute(context.Background(), task, worker.Slot{})
		require.NoError(t, err)
		if res.Error != nil {
			logs, _ := filepath.Glob(filepath.Join(e.LogDir(task), "*"))
			for _, l := range logs {
				data, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", l, data)
			}
		}
		require.Nil(t, res.Error, "%+v", res.Error)
		require.NoDirExists(t, e.layerDir(task), "the attempt's layer directory is removed once sealed")
		return res
	}

	parent := run(worker1, "parent", nil, `mkdir -p /opt/tool/bin`, `printf '#!/bin/sh\necho tool-ok\n' > /opt/tool/bin/tool`, `chmod +x /opt/tool/bin/tool`)
	require.True(t, strings.HasPrefix(parent.Container.Layer, "sha256:"), "%+v", parent.Container)
	require.Positive(t, parent.Container.LayerBytes)
	require.Empty(t, parent.Container.LayerNote)

	child := run(worker2, "child", parent.Container.Inherited(), `/opt/tool/bin/tool > out`)
	require.Equal(t, "tool-ok", wsFile(t, worker2, shellTask("child"), "out"), "the parent's layer reached the other worker")
	require.Equal(t, []string{parent.Container.Layer}, child.Container.Layers)
	require.Empty(t, child.Container.Layer, "a node that writes nothing over its image leaves no layer")

	big := run(worker1, "big", nil, `mkdir -p /opt && head -c 2097152 /dev/urandom > /opt/big`)
	require.Contains(t, big.Container.LayerNote, "over the 1 MB other workers are sent")
	again := run(worker1, "same-worker", big.Container.Inherited(), `test -s /opt/big && echo there > out`)
	require.Equal(t, "there", wsFile(t, worker1, shellTask("same-worker"), "out"), "its own worker keeps it")
	require.Empty(t, again.Container.LayerNote)
	elsewhere := run(worker2, "elsewhere", big.Container.Inherited(), `test -e /opt/big && echo there > out || echo absent > out`)
	require.Equal(t, "absent", wsFile(t, worker2, shellTask("elsewhere"), "out"))
	require.Contains(t, elsewhere.Container.LayerNote, "started from 0 of the 1 layers")
	require.Empty(t, elsewhere.Container.Layers)
}

func layerWorker(t *testing.T, store jetstream.ObjectStore, shareMB int) *Executor {
	t.Helper()
	t.Setenv("HOME", t.TempDir())
	e, err := NewExecutor(Config{RunsDir: t.TempDir(), KillGrace: 200 * time.Millisecond,
		Images: ImagesConfig{Dir: filepath.Join(t.TempDir(), "images"), LayerStore: store, ShareMB: shareMB, Dirs: []string{testImages(t)}}})
	require.NoError(t, err)
	if e.sandbox == nil {
		t.Skipf("no namespaces on this machine: %s", e.Isolation())
	}
	return e
}
