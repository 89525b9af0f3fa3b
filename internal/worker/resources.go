package worker

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/hpcq/hpcq/pkg/schema"
)

// resources hands out disjoint CPUs and GPUs to running tasks: a task's
// CPU set is its alone (its commands are bound to it), a GPU is never
// shared.
type resources struct {
	mu   sync.Mutex
	cpus []int // the worker's CPUs, in order
	// bind: cpus are real CPUs the tasks are bound to; false when the
	// worker was given more cores than it may run on (they are counted,
	// not bound).
	bind     bool
	gpus     []string // the worker's GPU ids
	busyCPU  map[int]bool
	busyGPU  map[string]bool
	memoryMB int // the worker's memory; 0: unknown
}

func newResources(cpus []int, cores int, gpus []string, memoryMB int) *resources {
	bind := len(cpus) >= cores
	if !bind {
		cpus = make([]int, cores)
		for i := range cpus {
			cpus[i] = i
		}
	}
	return &resources{cpus: cpus[:cores], bind: bind, gpus: gpus, busyCPU: map[int]bool{}, busyGPU: map[string]bool{}, memoryMB: memoryMB}
}

// need is what a task asks for: its limits, else a slot's share of the
// CPUs (none when the worker has more slots than CPUs: such tasks share
// the CPUs left, unbound, as the configuration asked), and a GPU when it
// requires one without saying how many.
func (r *resources) need(t *schema.NodeTask, slots int) (cpus, gpus int) {
	cpus = t.Limits.CPUs
	if cpus <= 0 {
		cpus = len(r.cpus) / max(1, slots)
	}
	gpus = t.Limits.GPUs
	if gpus <= 0 && len(r.gpus) > 0 && (slices.Contains(t.Requires, "gpu") || slices.Contains(t.Requires, "nvcc")) {
		gpus = 1
	}
	return cpus, gpus
}

// exceeds says why the task can never run on this worker, or "".
func (r *resources) exceeds(t *schema.NodeTask, slots int) string {
	cpus, gpus := r.need(t, slots)
	switch {
	case cpus > len(r.cpus):
		return fmt.Sprintf("it needs %d CPUs (limits.cpus) and the worker has %d", cpus, len(r.cpus))
	case gpus > len(r.gpus):
		return fmt.Sprintf("it needs %d GPUs (limits.gpus) and the worker has %d", gpus, len(r.gpus))
	case r.memoryMB > 0 && t.Limits.MemoryMB > r.memoryMB:
		return fmt.Sprintf("it needs %d MB of memory (limits.memory_mb) and the worker has %d MB", t.Limits.MemoryMB, r.memoryMB)
	}
	return ""
}

// take reserves the task's CPUs and GPUs; ok is false when they are not
// free now (other tasks hold them).
func (r *resources) take(t *schema.NodeTask, slots int) (cpus []int, gpus []string, ok bool) {
	nc, ng := r.need(t, slots)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.cpus {
		if len(cpus) == nc {
			break
		}
		if !r.busyCPU[c] {
			cpus = append(cpus, c)
		}
	}
	for _, g := range r.gpus {
		if len(gpus) == ng {
			break
		}
		if !r.busyGPU[g] {
			gpus = append(gpus, g)
		}
	}
	if len(cpus) < nc || len(gpus) < ng {
		return nil, nil, false
	}
	for _, c := range cpus {
		r.busyCPU[c] = true
	}
	for _, g := range gpus {
		r.busyGPU[g] = true
	}
	return cpus, gpus, true
}

// give returns what take reserved.
func (r *resources) give(cpus []int, gpus []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cpus {
		delete(r.busyCPU, c)
	}
	for _, g := range gpus {
		delete(r.busyGPU, g)
	}
}

// AffinityCPUs are the CPUs the process may run on (its cpuset: under
// Slurm, the job's allocation), in order.
func AffinityCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("worker: CPU affinity: %w", err)
	}
	var out []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// MemoryMB is the memory the worker may use: its cgroup's limit (v2
// memory.max, v1 memory.limit_in_bytes: a Slurm job's) when there is one,
// else the machine's (MemTotal); 0 when unknown.
func MemoryMB() int {
	total := 0
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.Atoi(f[1])
				total = kb / 1024
			}
		}
		f.Close()
	}
	if lim := cgroupMemoryLimit(); lim > 0 && (total == 0 || lim < total) {
		return lim
	}
	return total
}

// cgroupMemoryLimit is the memory limit of the process's cgroup in MB, or 0.
func cgroupMemoryLimit() int {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var file string
		switch {
		case parts[0] == "0" && parts[1] == "":
			file = "/sys/fs/cgroup" + parts[2] + "/memory.max"
		case strings.Contains(","+parts[1]+",", ",memory,"):
			file = "/sys/fs/cgroup/memory" + parts[2] + "/memory.limit_in_bytes"
		default:
			continue
		}
		v, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		b, err := strconv.ParseInt(strings.TrimSpace(string(v)), 10, 64)
		if err != nil || b <= 0 || b >= 1<<60 {
			continue // "max", or v1's "no limit"
		}
		return int(b >> 20)
	}
	return 0
}

// CPUList formats CPUs as a cpuset list: "0-3,6".
func CPUList(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(cpus[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
