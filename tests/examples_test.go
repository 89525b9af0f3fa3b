package tests

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/dispatch"
	"github.com/hpcq/hpcq/internal/executor"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/schema"
)

var examples = []string{"hello", "stencil-omp", "spmv-omp", "mpi-pi", "matmul-cuda"}

func loadExample(t *testing.T, name string) *schema.NodeTask {
	t.Helper()
	tasks, err := dispatch.LoadTasks([]string{filepath.Join("..", "examples", name, "task.json")}, "examples")
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	return tasks[0]
}

// TestExampleSourcesInSync: the sources beside each task.json are the ones
// the task carries.
func TestExampleSourcesInSync(t *testing.T) {
	for _, name := range examples {
		task := loadExample(t, name)
		for _, f := range task.Artifacts.Coding.Workspace.Files {
			disk, err := os.ReadFile(filepath.Join("..", "examples", name, f.Path))
			if os.IsNotExist(err) {
				continue
			}
			require.NoError(t, err)
			require.Equal(t, string(disk), f.Content, "examples/%s/%s differs from its copy in task.json", name, f.Path)
		}
		_, err := os.Stat(filepath.Join("..", "examples", name, "README.md"))
		require.NoError(t, err, "examples/%s has a README", name)
	}
}

// execExample runs an example's task through the real executor.
func execExample(t *testing.T, task *schema.NodeTask, slot worker.Slot) *schema.NodeResult {
	t.Helper()
	t.Setenv("HOME", t.TempDir())
	e, err := executor.NewExecutor(executor.Config{RunsDir: t.TempDir()})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := e.Execute(ctx, task, slot)
	require.NoError(t, err)
	require.Nil(t, res.Error, "%+v", res.Error)
	return res
}

func TestStencilOMPWithOneAndTwoThreads(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not found: the OpenMP example compiles C code")
	}
	task := loadExample(t, "stencil-omp")
	task.Artifacts.Run.Commands = []string{"./stencil 512 50 | tee stencil.out"} // smaller, same code
	for _, threads := range []int{1, 2} {
		res := execExample(t, task, worker.Slot{Cores: threads})
		require.EqualValues(t, threads, res.Metrics["threads"], "OMP_NUM_THREADS follows the slot's cores")
		require.Greater(t, res.Metrics["gflops"], 0.0)
		require.Greater(t, res.Metrics["time_s"], 0.0)
		require.Equal(t, "GFLOP/s", res.MetricUnits["gflops"])
		require.Equal(t, []string{"stencil.out"}, res.OutputsFound)
		t.Logf("%d thread(s): %.3f GFLOP/s", threads, res.Metrics["gflops"])
	}
}

func TestMPIPi(t *testing.T) {
	testutil.RequireBinary(t, "mpicc", "scripts/services.sh install mpi")
	res := execExample(t, loadExample(t, "mpi-pi"), worker.Slot{Cores: 2})
	require.Less(t, res.Metrics["pi_error"], 1e-9)
	require.Contains(t, res.Phases[len(res.Phases)-1].LogTail, "ranks=2")
}

func TestMatmulCUDA(t *testing.T) {
	if _, err := exec.LookPath("nvcc"); err != nil {
		t.Skip("nvcc not found: the CUDA example needs the CUDA toolkit and a GPU")
	}
	tc := executor.DetectToolchains(context.Background(), os.Environ(), true, testutil.Logger(t))
	ids := executor.GPUIDs(tc, os.Getenv("CUDA_VISIBLE_DEVICES"))
	if len(ids) == 0 {
		t.Skip("nvcc found but no GPU reported by nvidia-smi")
	}
	res := execExample(t, loadExample(t, "matmul-cuda"), worker.Slot{Cores: 1, GPUs: ids[:1]})
	require.Greater(t, res.Metrics["gflops"], 0.0)
	require.Less(t, res.Metrics["max_error"], 1e-3)
}

// TestCUDATaskWithoutNvccIsDeadLettered: on a machine without nvcc, the
// CUDA example ends on the dead-letter subject with the reason.
func TestCUDATaskWithoutNvccIsDeadLettered(t *testing.T) {
	if _, err := exec.LookPath("nvcc"); err == nil {
		t.Skip("nvcc is installed here: no worker lacks it")
	}
	t.Parallel()
	out, code := run(t, baseEnv(t), "scheduler", "exec", "--local", "--runs-dir", t.TempDir(), "../examples/matmul-cuda/task.json")
	require.Equal(t, 1, code, out)
	require.Regexp(t, `matmul-cuda\s+1\s+dead_lettered\s+.*no worker in pool gpu has nvcc, gpu`, out)
}

// TestStencilCUDAExample: examples/stencil-cuda's scripted nodes carry the
// stencil.cu beside them; on a GPU machine with nvcc its tree runs to a
// best node whose checksum every node shares; elsewhere its first node is
// declined with the reason, at once.
func TestStencilCUDAExample(t *testing.T) {
	src, err := os.ReadFile("../examples/stencil-cuda/stencil.cu")
	require.NoError(t, err)
	data, err := os.ReadFile("../examples/stencil-cuda/cassette.jsonl")
	require.NoError(t, err)
	nodes := 0
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var rec struct {
			Scripted bool   `json:"scripted"`
			Purpose  string `json:"purpose"`
			Response struct {
				Content string `json:"content"`
			} `json:"response"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		require.True(t, rec.Scripted, "every reply is marked as scripted")
		if !strings.Contains(rec.Response.Content, "phase_artifacts") {
			continue
		}
		code := rec.Response.Content[strings.Index(rec.Response.Content, "```json")+7 : strings.LastIndex(rec.Response.Content, "```")]
		var reply struct {
			Artifacts schema.Artifacts `json:"phase_artifacts"`
		}
		require.NoError(t, json.Unmarshal([]byte(code), &reply), rec.Purpose)
		require.Equal(t, string(src), reply.Artifacts.Coding.Workspace.Files[0].Content, "%s: stencil.cu differs from the cassette's", rec.Purpose)
		nodes++
	}
	require.Equal(t, 5, nodes, "draft, hyperparam, improve, ablation, debug")

	runs := t.TempDir()
	_, nvccErr := exec.LookPath("nvcc")
	gpus := 0
	if nvccErr == nil {
		tc := executor.DetectToolchains(context.Background(), os.Environ(), true, testutil.Logger(t))
		gpus = len(executor.GPUIDs(tc, os.Getenv("CUDA_VISIBLE_DEVICES")))
	}
	out, code := run(t, baseEnv(t), "scheduler", "run", "--local", "--runs-dir", runs, "../examples/stencil-cuda")
	if nvccErr != nil || gpus == 0 {
		require.Contains(t, out, `reason="dead-lettered: no worker in pool gpu has nvcc, gpu"`)
		require.Contains(t, out, "no node produced gflops")
		t.Skip("no nvcc or no GPU here: the tree was declined as it should be; scripts/gpu-check.sh runs it on a GPU machine")
	}
	require.Equal(t, 0, code, out)
	q, _ := run(t, baseEnv(t), "scheduler", "query", "--runs-dir", runs, "--format", "csv",
		"SELECT COUNT(DISTINCT value) FROM metrics WHERE name = 'checksum'")
	require.Contains(t, q, "\n1\n", "every node's grid is the same")
	require.Regexp(t, `best n\d+: gflops = \S+ GFLOP/s`, out)
}

// TestSpmvExample: examples/spmv-omp's evaluator runs the node's whole
// program on the matrices it writes: as a task of `scheduler exec` and as
// the idea of a tree search, where every node's metric is the harness's
// and the held-out gate names the run's best.
func TestSpmvExample(t *testing.T) {
	t.Parallel()
	requireTool(t, "gcc")
	dir := t.TempDir()
	env := baseEnv(t, "HPCQ_RUNS_DIR="+filepath.Join(dir, "runs"))
	out, code := run(t, env, "scheduler", "exec", "--local", "../examples/spmv-omp/task.json")
	require.Equal(t, 0, code, out)
	require.Regexp(t, `spmv-omp\s+1\s+ok\s+\S+\s+compile=0 run=0 evaluate_quick=0 evaluate=0\s+local-\d\s+evaluated=[0-9.]+ GFLOP/s`, out)

	out, code = run(t, env, "scheduler", "run", "--local", "--run-dir", filepath.Join(dir, "spmv"), "../examples/spmv-omp")
	require.Equal(t, 0, code, out)
	require.Regexp(t, `\nevaluation nodes=3 correct=3 incorrect=0 self_report_rejected=0 held_out_best=n000\d held_out_metric=[0-9.e+-]+ overfit=\d\n`, out)
	q, code := run(t, env, "scheduler", "query", "--run-dir", filepath.Join(dir, "spmv"), "--format", "csv",
		"SELECT count(*) AS n FROM nodes WHERE metric_from = 'evaluator' AND metric_value > 0")
	require.Equal(t, 0, code, q)
	require.Equal(t, "n\n3\n", q)
}
