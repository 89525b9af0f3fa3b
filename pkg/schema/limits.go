package schema

import "math"

// Limits bound a task's execution. Zero values mean "the worker's default"
// (for the resource limits: no limit).
type Limits struct {
	DownloadTimeoutS int `json:"download_timeout_s,omitempty" yaml:"download_timeout_s"`
	CompileTimeoutS  int `json:"compile_timeout_s,omitempty" yaml:"compile_timeout_s"`
	RunTimeoutS      int `json:"run_timeout_s,omitempty" yaml:"run_timeout_s"`
	CPUs             int `json:"cpus,omitempty" yaml:"cpus"`
	// GPUs the task needs: a whole number (its alone), or a fraction of
	// one below 1 (0.25: tasks share a device, CUDA_VISIBLE_DEVICES the
	// same, each held to its share of the streaming multiprocessors where
	// the site runs MPS), in steps of GPUShareStep.
	GPUs     float64 `json:"gpus,omitempty" yaml:"gpus"`
	MemoryMB int     `json:"memory_mb,omitempty" yaml:"memory_mb"`
	// Nodes a task spans (its run's MPI ranks on each), RanksPerNode and
	// CPUsPerRank their shape: a task of more than one node runs on a
	// worker whose Slurm allocation has that many nodes, its commands
	// launching the ranks with $HPCQ_MPIRUN. 0: one node; 1 rank a node
	// and the node's CPUs shared out.
	Nodes        int `json:"nodes,omitempty" yaml:"nodes"`
	RanksPerNode int `json:"ranks_per_node,omitempty" yaml:"ranks_per_node"`
	CPUsPerRank  int `json:"cpus_per_rank,omitempty" yaml:"cpus_per_rank"`
	// MaxOutputBytes kept in memory per stream (stdout, stderr) of a phase.
	MaxOutputBytes int64 `json:"max_output_bytes,omitempty" yaml:"max_output_bytes"`
	// AddressSpaceMB, FileSizeMB and OpenFiles are resource limits (ulimit
	// -v, -f, -n) on every command of the task.
	AddressSpaceMB int `json:"address_space_mb,omitempty" yaml:"address_space_mb"`
	FileSizeMB     int `json:"file_size_mb,omitempty" yaml:"file_size_mb"`
	OpenFiles      int `json:"open_files,omitempty" yaml:"open_files"`
	// Pids bounds the processes and threads of the task at once (cgroup
	// pids.max); 0: the worker's default (HPCQ_TASK_PIDS).
	Pids int `json:"pids,omitempty" yaml:"pids"`
	// DiskMB bounds what the task's workspace holds on disk while it runs;
	// 0: the worker's default (HPCQ_TASK_DISK_MB; none unless set).
	DiskMB int `json:"disk_mb,omitempty" yaml:"disk_mb"`
	// Network, when false, runs the compile and run phases without a
	// network (their own network namespace with loopback only); the
	// download phase keeps it. Unset means true.
	Network *bool `json:"network,omitempty" yaml:"network"`
}

// MultiNode reports whether the task spans more than one node.
func (l Limits) MultiNode() bool { return l.Nodes > 1 }

// GPUShareStep is the smallest share of a GPU a task may ask for (as
// HyperQueue's fractional resources: four decimal places).
const GPUShareStep = 1e-4

// GPUUnits is limits.gpus in units of GPUShareStep (10000 a whole GPU).
func (l Limits) GPUUnits() int { return int(math.Round(l.GPUs / GPUShareStep)) }

// checkGPUs: limits.gpus is a finite number, not negative, whole above 1
// (a task shares at most one device), in steps of GPUShareStep.
func (l Limits) checkGPUs() error {
	g := l.GPUs
	switch {
	case math.IsNaN(g) || math.IsInf(g, 0) || g < 0:
		return fieldErr("limits.gpus", "%v, must be a number not below 0", g)
	case g > 1024:
		return fieldErr("limits.gpus", "%v, at most 1024", g)
	case g > 1 && g != math.Trunc(g):
		return fieldErr("limits.gpus", "%v: a share of a GPU is below 1; more than one GPU is a whole number", g)
	case math.Abs(g/GPUShareStep-math.Round(g/GPUShareStep)) > 1e-6:
		return fieldErr("limits.gpus", "%v: a share is in steps of %v", g, GPUShareStep)
	case g > 0 && l.GPUUnits() == 0:
		return fieldErr("limits.gpus", "%v: below the smallest share, %v", g, GPUShareStep)
	}
	return nil
}

// NoNetwork reports whether the task's compile and run phases must run
// without a network.
func (l Limits) NoNetwork() bool { return l.Network != nil && !*l.Network }
