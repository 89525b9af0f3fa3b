package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/image/imagetest"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// blasIdea is examples/blas-in-image copied into a directory of its own,
// its run.yaml naming image.
func blasIdea(t *testing.T, image string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"idea.md", "cassette.jsonl", "run.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "examples", "blas-in-image", f))
		require.NoError(t, err)
		if f == "run.yaml" {
			re := regexp.MustCompile(`(?m)^  image: image\b.*$`)
			require.True(t, re.Match(data), "run.yaml names its image as the test expects")
			data = re.ReplaceAll(data, []byte("  image: "+image))
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), data, 0o644))
	}
	return dir
}

func readResult(t *testing.T, runDir, node string) *schema.NodeResult {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(runDir, "nodes", node, "result.json"))
	require.NoError(t, err)
	var o rundir.Outcome
	require.NoError(t, json.Unmarshal(data, &o))
	require.NotNil(t, o.Result, node)
	require.Nil(t, o.Result.Error, "%s: %+v", node, o.Result.Error)
	require.NotNil(t, o.Result.Container, node)
	return o.Result
}

func hasPhase(r *schema.NodeResult, name string) bool {
	for _, p := range r.Phases {
		if p.Name == name {
			return true
		}
	}
	return false
}

// TestBlasExampleInEveryImage is examples/blas-in-image as its README runs
// it, with its image as a directory, a SquashFS, a SIF and an OCI layout:
// the draft's Phase 1 installs OpenBLAS with apt-get in its container
// (offline), and the three nodes below start from its layer and link
// against OpenBLAS without a download phase.
func TestBlasExampleInEveryImage(t *testing.T) {
	t.Parallel()
	images := imagetest.DebianImages(t)
	for _, kind := range []string{"dir", "sqfs", "sif", "oci"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			env := baseEnv(t, "HPCQ_RUNS_DIR="+filepath.Join(dir, "runs"))
			runDir := filepath.Join(dir, "run")
			began := time.Now()
			p := start(t, env, "scheduler", "run", "--local", "--run-dir", runDir, blasIdea(t, images[kind]))
			require.Equal(t, 0, p.wait(t, 5*time.Minute), p.output())
			out := p.output()
			require.Regexp(t, `4 nodes \(0 buggy, 0 from the result cache\), best n\d+: gflops = [0-9.]+ GFLOP/s`, out)

			draft := readResult(t, runDir, "n0001")
			require.Equal(t, kind, draft.Container.Kind)
			require.True(t, hasPhase(draft, schema.PhaseDownload), "the draft installs")
			require.True(t, strings.HasPrefix(draft.Container.Layer, "sha256:"), "%+v", draft.Container)
			require.Contains(t, draft.Container.LayerHolds, "libopenblas-dev")
			require.Empty(t, draft.Container.LayerNote)
			for _, n := range []string{"n0002", "n0003", "n0004"} {
				r := readResult(t, runDir, n)
				require.Equal(t, []string{draft.Container.Layer}, r.Container.Layers, "%s starts from the draft's layer", n)
				require.False(t, hasPhase(r, schema.PhaseDownload), "%s installs nothing", n)
				require.Positive(t, r.Metrics["gflops"], n)
			}
			t.Logf("%s: the run took %s; the draft's Phase 1 %d ms, its layer %d MB",
				kind, time.Since(began).Round(time.Millisecond), phaseMS(draft, schema.PhaseDownload), draft.Container.LayerBytes>>20)
			if kind == "dir" {
				// The run's store keeps the layer for a resume, says so, and
				// purge removes it.
				require.Regexp(t, `store:  \S+/nats holds \d+ MB \(the run's queue: its nodes' layers, kept for a resume; \S+ purge --run-dir \S+ removes them\)`, out)
				pout, code := run(t, env, "scheduler", "purge", "--run-dir", runDir)
				require.Equal(t, 0, code, pout)
				require.Regexp(t, `purged from the server: \d+ task\(s\), \d+ result\(s\), \d+ artifact\(s\), 1 layer\(s\) \(\d+ MB; a resume starts its new nodes without them\)`, pout)
			}
		})
	}
}

func phaseMS(r *schema.NodeResult, name string) int64 {
	for _, p := range r.Phases {
		if p.Name == name {
			return p.DurationMS
		}
	}
	return 0
}

// TestLayerTravelsBetweenWorkers: on a cluster with no shared file
// system, an image pushed with `scheduler image push` reaches the workers
// through the object store; a task's writes over it (OpenBLAS, installed
// by apt-get) reach a task that names its layer on another worker, whose
// image cache never saw it, through the object store too; that worker
// compiles against it without installing anything.
func TestLayerTravelsBetweenWorkers(t *testing.T) {
	t.Parallel()
	images := imagetest.DebianImages(t)
	n := testutil.StartNATS(t, "nats-server")
	env := baseEnv(t, "HPCQ_NATS_URL="+n.URL)
	dir := t.TempDir()
	exec := func(task *schema.NodeTask) *schema.NodeResult {
		t.Helper()
		data, err := json.Marshal(task)
		require.NoError(t, err)
		path := filepath.Join(dir, task.NodeID+".json")
		require.NoError(t, os.WriteFile(path, data, 0o644))
		out, code := run(t, env, "scheduler", "exec", "--json", "--runs-dir", filepath.Join(dir, "runs"), "--timeout", "110s", path)
		require.Equal(t, 0, code, out)
		var o rundir.Outcome
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &o) == nil && o.Result != nil {
				break
			}
		}
		require.NotNil(t, o.Result, out)
		require.Nil(t, o.Result.Error, "%+v\n%s", o.Result.Error, out)
		return o.Result
	}
	out, code := run(t, env, "scheduler", "image", "push", images["sqfs"])
	require.Equal(t, 0, code, out)
	ref := regexp.MustCompile(`name it as image: (store:sha256:[0-9a-f]{64})`).FindStringSubmatch(out)
	require.NotNil(t, ref, out)
	out, code = run(t, env, "scheduler", "image", "push", images["sqfs"])
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "is there already", "pushed once per digest")
	out, code = run(t, env, "scheduler", "image", "ls")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, ref[1])
	require.Contains(t, out, "sqfs")
	out, code = run(t, env, "scheduler", "image", "push", images["dir"])
	require.NotEqual(t, 0, code)
	require.Contains(t, out, "is a directory: push a file of it")

	workA, workB := t.TempDir(), t.TempDir()
	a := start(t, append(env, "HPCQ_WORK_DIR="+workA), "worker", "--slots", "1", "--id", "worker-a")
	parent := runTask("parent", "ls /usr/lib/x86_64-linux-gnu/libopenblas.so")
	parent.RunID = "layers"
	parent.Artifacts.Download.Commands = []string{"apt-get install -y --no-download libopenblas-dev"}
	parent.Container = &schema.Container{Image: ref[1]}
	pres := exec(parent)
	require.True(t, strings.HasPrefix(pres.Container.Layer, "sha256:"), "%+v", pres.Container)
	require.Empty(t, pres.Container.LayerNote, "shared")
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, a.wait(t, time.Minute), a.output())

	start(t, append(env, "HPCQ_WORK_DIR="+workB), "worker", "--slots", "1", "--id", "worker-b")
	src, err := os.ReadFile(filepath.Join("..", "examples", "blas-in-image", "dgemm.c"))
	require.NoError(t, err)
	child := runTask("child", "./dgemm 256 2")
	child.RunID = "layers"
	child.Artifacts.Coding.Workspace.Files = []schema.File{{Path: "dgemm.c", Content: string(src)}}
	child.Artifacts.Compile.Commands = []string{"gcc -O2 -fopenmp -o dgemm dgemm.c -lopenblas -lm"}
	child.Artifacts.Run.MetricPatterns = []schema.MetricPattern{{Name: "gflops", Regex: `METRIC gflops=([0-9.]+)`}}
	child.Container = &schema.Container{Image: ref[1], Layers: pres.Container.Inherited()}
	cres := exec(child)
	require.Equal(t, []string{pres.Container.Layer}, cres.Container.Layers)
	require.Equal(t, "sqfs", cres.Container.Kind)
	require.Equal(t, strings.TrimPrefix(ref[1], "store:"), cres.Container.Digest)
	require.Empty(t, cres.Container.LayerNote)
	require.Positive(t, cres.Metrics["gflops"])
	require.FileExists(t, filepath.Join(workB, ".images", strings.TrimPrefix(pres.Container.Layer, "sha256:"), "layer.tar"),
		"worker-b fetched the layer into its cache")
}
