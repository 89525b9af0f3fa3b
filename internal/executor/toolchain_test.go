package executor

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// detection is detectScript's output with the three nvidia-smi reports of
// testdata (the query's CSV, -L and -q -x).
func detection(t *testing.T, query, list, xml string) Toolchains {
	t.Helper()
	var b strings.Builder
	for _, s := range []struct{ name, file string }{{"nvidia-smi", query}, {"nvidia-smi-L", list}, {"nvidia-smi-x", xml}} {
		if s.file == "" {
			continue
		}
		data, err := os.ReadFile(filepath.Join("testdata", s.file))
		require.NoError(t, err)
		b.WriteString("@@hpcq " + s.name + "\n" + strings.TrimRight(string(data), "\n") + "\n@@rc 0\n")
	}
	return parseDetection(b.String())
}

// TestH200Detection: a real H200's three reports (testdata/README.md) give
// its model, memory, UUID, architecture, driver and CUDA versions.
func TestH200Detection(t *testing.T) {
	tc := detection(t, "nvidia-smi-query-h200.csv", "nvidia-smi-L-h200.txt", "nvidia-smi-q-x-h200.xml")
	require.Empty(t, tc.Notes)
	require.Equal(t, []queue.GPUDevice{{Index: "0", Name: "NVIDIA H200", MemoryMB: 143771, ComputeCapability: "9.0",
		UUID: "GPU-05ed2e5c-3b07-07d1-309f-4e28481adcaa", Architecture: "Hopper", Driver: "580.159.04", CUDA: "13.0", ComputeMode: "Default"}}, tc.GPUs)
	require.Equal(t, "1", tc.Versions["gpu"])
	require.Equal(t, []string{"0"}, GPUIDs(tc, ""))

	// Without the query (its compute_cap field is newer than some drivers)
	// the GPUs are those -q -x lists.
	tc = detection(t, "", "nvidia-smi-L-h200.txt", "nvidia-smi-q-x-h200.xml")
	require.Len(t, tc.GPUs, 1)
	require.Equal(t, "NVIDIA H200", tc.GPUs[0].Name)
	require.Equal(t, 143771, tc.GPUs[0].MemoryMB)
	require.Equal(t, "13.0", tc.GPUs[0].CUDA)

	// A report that is not XML is said, and the rest still counts.
	bad := parseDetection("@@hpcq nvidia-smi\n0, NVIDIA H200, 143771, 9.0\n@@rc 0\n@@hpcq nvidia-smi-x\n<nvidia_smi_log><gpu>\n@@rc 0\n")
	require.Len(t, bad.GPUs, 1)
	require.Len(t, bad.Notes, 1)
	require.Contains(t, bad.Notes[0], "nvidia-smi -q -x: XML syntax error")
}

// migXML is an excerpt of nvidia-smi -q -x on an A100 80GB split into two
// 3g.40gb MIG instances (see TestMIGFromXML).
const migXML = `<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
	<driver_version>575.57.08</driver_version>
	<cuda_version>12.9</cuda_version>
	<attached_gpus>1</attached_gpus>
	<gpu id="00000000:00:09.0">
		<product_name>NVIDIA A100 80GB PCIe</product_name>
		<mig_mode><current_mig>Enabled</current_mig><pending_mig>Enabled</pending_mig></mig_mode>
		<mig_devices>
			<mig_device><index>0</index><gpu_instance_id>1</gpu_instance_id><compute_instance_id>0</compute_instance_id>
				<device_attributes><shared><multiprocessor_count>42</multiprocessor_count></shared></device_attributes>
				<fb_memory_usage><total>40448 MiB</total></fb_memory_usage></mig_device>
			<mig_device><index>1</index><gpu_instance_id>2</gpu_instance_id><compute_instance_id>0</compute_instance_id>
				<device_attributes><shared><multiprocessor_count>42</multiprocessor_count></shared></device_attributes>
				<fb_memory_usage><total>40448 MiB</total></fb_memory_usage></mig_device>
		</mig_devices>
		<uuid>GPU-5a6b7c8d-0000-1111-2222-333344445555</uuid>
		<fb_memory_usage><total>81920 MiB</total></fb_memory_usage>
		<compute_mode>Default</compute_mode>
	</gpu>
</nvidia_smi_log>`

// TestMIGFromXML: the MIG instances of -L get their memory, multiprocessors
// and instance ids from -q -x (the excerpt of an A100 80GB split into two
// 3g.40gb instances, driver 575.57.08, as GPUStack's nvidia-smi parser
// documents it), matched by device number.
func TestMIGFromXML(t *testing.T) {
	xml := migXML
	list := "GPU 0: NVIDIA A100 80GB PCIe (UUID: GPU-5a6b7c8d-0000-1111-2222-333344445555)\n" +
		"  MIG 3g.40gb     Device  0: (UUID: MIG-11111111-2222-5333-8444-555555555555)\n" +
		"  MIG 3g.40gb     Device  1: (UUID: MIG-66666666-7777-5888-9999-aaaaaaaaaaaa)\n"
	tc := parseDetection("@@hpcq nvidia-smi\n0, NVIDIA A100 80GB PCIe, 81920, 8.0\n@@rc 0\n@@hpcq nvidia-smi-L\n" + list + "@@rc 0\n@@hpcq nvidia-smi-x\n" + xml + "\n@@rc 0\n")
	require.Len(t, tc.GPUs, 1)
	g := tc.GPUs[0]
	require.True(t, g.MIGEnabled)
	require.Equal(t, "575.57.08", g.Driver)
	require.Equal(t, []queue.MIGDevice{
		{Profile: "3g.40gb", Device: 0, UUID: "MIG-11111111-2222-5333-8444-555555555555", MemoryMB: 40448, SMs: 42, GPUInstance: 1},
		{Profile: "3g.40gb", Device: 1, UUID: "MIG-66666666-7777-5888-9999-aaaaaaaaaaaa", MemoryMB: 40448, SMs: 42, GPUInstance: 2},
	}, g.MIG)
	require.Equal(t, []string{"MIG-11111111-2222-5333-8444-555555555555", "MIG-66666666-7777-5888-9999-aaaaaaaaaaaa"}, GPUIDs(tc, ""))
}

// FuzzGPUReports: no nvidia-smi output makes the detection panic, and every
// GPU it reports has an index.
func FuzzGPUReports(f *testing.F) {
	for _, name := range []string{"nvidia-smi-L-a100-mig.txt", "nvidia-smi-query-h200.csv"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		require.NoError(f, err)
		f.Add(string(data))
	}
	f.Add(migXML)
	f.Fuzz(func(t *testing.T, s string) {
		for _, section := range []string{"nvidia-smi", "nvidia-smi-L", "nvidia-smi-x"} {
			tc := parseDetection("@@hpcq " + section + "\n" + s + "\n@@rc 0\n")
			for _, g := range tc.GPUs {
				require.NotEmpty(t, g.Index)
			}
		}
	})
}
