package executor

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/queue"
)

func TestParseDetection(t *testing.T) {
	out := `@@hpcq gcc
gcc (Debian 12.2.0-14) 12.2.0
Copyright (C) 2022 Free Software Foundation, Inc.
@@rc 0
@@hpcq clang
Debian clang version 14.0.6
@@rc 0
@@hpcq nvcc
nvcc: NVIDIA (R) Cuda compiler driver
Cuda compilation tools, release 12.4, V12.4.131
@@rc 0
@@hpcq cmake
cmake version 3.25.1
@@rc 0
@@hpcq mpicc
gcc (Debian 12.2.0-14) 12.2.0
@@rc 0
@@hpcq mpirun
mpirun (Open MPI) 4.1.4
@@rc 0
@@hpcq nvidia-smi
1, NVIDIA A100-SXM4-40GB, 40960, 8.0
0, NVIDIA A100-SXM4-40GB, 40960, 8.0
@@rc 0
@@hpcq openmp-gcc
2
@@rc 0
@@hpcq openmp-clang
p.c:1:10: fatal error: 'omp.h' file not found
@@rc 1
@@hpcq gfortran
@@rc 127
`
	tc := parseDetection(out)
	require.Equal(t, map[string]string{"gcc": "12.2.0", "clang": "14.0.6", "nvcc": "12.4", "cmake": "3.25.1",
		"mpicc": "12.2.0", "mpirun": "4.1.4", "mpi": "Open MPI 4.1.4", "openmp": "gcc", "gpu": "2"}, tc.Versions)
	require.Equal(t, []queue.GPUDevice{
		{Index: "0", Name: "NVIDIA A100-SXM4-40GB", MemoryMB: 40960, ComputeCapability: "8.0"},
		{Index: "1", Name: "NVIDIA A100-SXM4-40GB", MemoryMB: 40960, ComputeCapability: "8.0"},
	}, tc.GPUs)
	require.Empty(t, worker.MissingToolchains(tc.Versions, []string{"mpi", "gcc", "openmp", "nvcc", "gpu"}))
	require.Equal(t, []string{"gfortran", "hip"}, worker.MissingToolchains(tc.Versions, []string{"gcc", "gfortran", "openmp", "hip"}))

	mpich := parseDetection("@@hpcq mpirun\nHYDRA build details:\n    Version:                                 4.0.2\n@@rc 0\n")
	require.Equal(t, "MPICH 4.0.2", mpich.Versions["mpi"])
	require.Equal(t, []string{"mpi"}, worker.MissingToolchains(mpich.Versions, []string{"mpi"}), "mpi needs mpicc too")
	require.Empty(t, parseDetection("garbage\n@@rc 0\n@@hpcq gcc\n").Versions)
}

func TestDetectToolchainsHere(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	tc := DetectToolchains(context.Background(), os.Environ(), true, testutil.Logger(t))
	if _, err := exec.LookPath("gcc"); err == nil {
		require.NotEmpty(t, tc.Versions["gcc"])
		require.Contains(t, tc.Versions["openmp"], "gcc", "gcc -fopenmp compiles and runs the probe here")
	}
	if _, err := exec.LookPath("nvcc"); err != nil {
		require.NotContains(t, tc.Versions, "nvcc")
	}
}

// TestMIGEnumeration: an A100 split into seven MIG instances (nvidia-smi
// -L as a real machine printed it, testdata/README.md) is seven GPUs to the
// worker's slots, by UUID; the card itself is none. CUDA_VISIBLE_DEVICES,
// when set (Slurm), still wins.
func TestMIGEnumeration(t *testing.T) {
	listed, err := os.ReadFile("testdata/nvidia-smi-L-a100-mig.txt")
	require.NoError(t, err)
	tc := parseDetection("@@hpcq nvidia-smi\n0, NVIDIA A100 40GB PCIe, 40960, 8.0\n@@rc 0\n@@hpcq nvidia-smi-L\n" + string(listed) + "@@rc 0\n")
	require.Len(t, tc.GPUs, 1)
	g := tc.GPUs[0]
	require.Equal(t, "GPU-48aeb943-9458-4282-da24-e5f49e0db44b", g.UUID)
	require.Len(t, g.MIG, 7)
	require.Equal(t, queue.MIGDevice{Profile: "1g.5gb", Device: 6, UUID: "MIG-37e055e8-8890-567f-a646-ebf9fde3ce7a"}, g.MIG[6])
	ids := GPUIDs(tc, "")
	require.Len(t, ids, 7)
	require.Equal(t, "MIG-fb42055e-9e53-5764-9278-438605a3014c", ids[0])
	require.Equal(t, []string{"MIG-x", "MIG-y"}, GPUIDs(tc, "MIG-x, MIG-y"))

	plain := parseDetection("@@hpcq nvidia-smi\n0, NVIDIA H100, 81559, 9.0\n@@rc 0\n@@hpcq nvidia-smi-L\nGPU 0: NVIDIA H100 (UUID: GPU-0a1b2c3d-0000-1111-2222-333344445555)\n@@rc 0\n")
	require.Equal(t, []string{"0"}, GPUIDs(plain, ""), "an unsplit GPU by its index")
	require.Equal(t, "GPU-0a1b2c3d-0000-1111-2222-333344445555", plain.GPUs[0].UUID)
}
