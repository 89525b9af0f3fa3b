package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/dispatch"
	"github.com/hpcq/hpcq/internal/executor"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/schema"
)

var examples = []string{"hello", "stencil-omp", "mpi-pi", "matmul-cuda"}

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
