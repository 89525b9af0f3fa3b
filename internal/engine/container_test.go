package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/fakellm"
	"github.com/hpcq/hpcq/internal/image/imagetest"
	"github.com/hpcq/hpcq/internal/run"
	"github.com/hpcq/hpcq/internal/runview"
	"github.com/hpcq/hpcq/internal/testutil"
)

// TestRunInAnImage: run.yaml's container puts every node's phases in the
// image: the nodes' scripts read the image's files, each result names the
// image and its digest, and the prompts' Environment section says so.
func TestRunInAnImage(t *testing.T) {
	t.Parallel()
	sqfs := imagetest.SquashFS(t, testutil.BusyboxRoot(t, "hpcq-run-image"))
	spec := newSpec(t)
	spec.Container = &run.Container{Image: sqfs}
	spec.Stages.InitialImplementation.MaxIterations = 3 // two drafts, then a child of the better
	require.NoError(t, spec.Validate())
	var mu sync.Mutex
	var envText []string
	handle := func(r fakellm.Request) fakellm.Reply {
		if r.Kind == "draft" || r.Kind == "improve" || r.Kind == "debug" {
			mu.Lock()
			envText = append(envText, r.Messages[len(r.Messages)-1].Content)
			mu.Unlock()
			return fakellm.Reply{Content: fakellm.WithMemory(emptyUpdate, fakellm.Artifacts([]fakellm.File{{Path: "run.sh",
				// Each node leaves a file in /etc: a node's score is how many
				// it sees, its own and its ancestors' (their layers).
				Content: fmt.Sprintf("grep -q '^ID=hpcq-run-image$' /etc/os-release || exit 3\ntouch /etc/hpcq-%s-%d\n"+
					"echo \"METRIC score=$(ls /etc | grep -c '^hpcq-') points\"\n", r.Kind, r.KindN)}},
				nil, []string{"sh run.sh"}))}
		}
		return normal(r)
	}
	e := setup(t, spec, handle, "")
	sum, err := runEngine(t, context.Background(), e.sp, e.p)
	require.NoError(t, err)
	require.True(t, sum.HasBest, "the nodes ran in the image and gave the metric")
	for _, n := range []string{"n0001", "n0002", "n0003"} {
		o := readOutcome(t, e.dir, n)
		require.NotNil(t, o.Result, n)
		require.Nil(t, o.Result.Error, "%s: %+v", n, o.Result.Error)
		require.NotNil(t, o.Result.Container, n)
		require.Equal(t, sqfs, o.Result.Container.Image)
		require.Equal(t, "sqfs", o.Result.Container.Kind)
		require.True(t, strings.HasPrefix(o.Result.Container.Digest, "sha256:"))
		require.Nil(t, o.Result.Toolchain, "the host's toolchains are not claimed for a node run in an image")
		require.True(t, strings.HasPrefix(o.Result.Container.Layer, "sha256:"), "%s left a layer: %+v", n, o.Result.Container)
	}
	child := readOutcome(t, e.dir, "n0003")
	task := readTask(t, e.dir, "n0003")
	require.NotEmpty(t, task.ParentID)
	parent := readOutcome(t, e.dir, task.ParentID)
	require.Equal(t, []string{parent.Result.Container.Layer}, task.Container.Layers, "the child's task names its parent's layer")
	require.Equal(t, task.Container.Layers, child.Result.Container.Layers, "and started from it")
	require.InDelta(t, 1, parent.Result.Metrics["score"], 0, "a draft sees its own file")
	require.InDelta(t, 2, child.Result.Metrics["score"], 0, "the child sees its parent's file and its own")
	lines, err := runview.ListNodes(e.dir)
	require.NoError(t, err)
	require.Equal(t, sqfs, lines[0].Image, "ls --json says the image")
	n, err := runview.ReadNode(e.dir, lines[0].Node, lines)
	require.NoError(t, err)
	require.Equal(t, "sqfs", n.Container.Kind, "the dashboard's node panel has the container")
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, envText)
	require.Contains(t, envText[0], "run inside the container image image.sqfs")
	require.Contains(t, envText[len(envText)-1], "This node starts from its parent's environment: the image with the 1 layer(s)")
}
