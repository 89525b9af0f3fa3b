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

// wholeGPU is a whole GPU in units of schema.GPUShareStep.
const wholeGPU = 10000

// resources hands out disjoint CPUs and GPUs to running tasks: a task's
// CPU set is its alone (its commands are bound to it); a GPU is its alone
// when it asks for one or more, shared with other tasks that ask for
// shares of one (limits.gpus below 1) up to the whole of it.
type resources struct {
	mu   sync.Mutex
	cpus []int // the worker's CPUs, in order
	// bind: cpus are real CPUs the tasks are bound to; false when the
	// worker was given more cores than it may run on (they are counted,
	// not bound).
	bind    bool
	gpus    []string // the worker's GPU ids
	busyCPU map[int]bool
	// gpuUsed is how much of each GPU the running tasks hold, in units of
	// schema.GPUShareStep; gpuPool how much the tasks of each pool hold.
	gpuUsed  map[string]int
	gpuPool  map[string]int
	memoryMB int // the worker's memory; 0: unknown
}

// grant is what one task holds: its CPUs, its GPUs and how much of each
// (wholeGPU: the GPU is its alone), for the tasks of pool.
type grant struct {
	cpus  []int
	gpus  []string
	units int
	pool  string
}

// share is the part of each of its GPUs the grant holds (1: all of it).
func (g grant) share() float64 {
	if len(g.gpus) == 0 {
		return 0
	}
	return float64(g.units) / wholeGPU
}

func newResources(cpus []int, cores int, gpus []string, memoryMB int) *resources {
	bind := len(cpus) >= cores
	if !bind {
		cpus = make([]int, cores)
		for i := range cpus {
			cpus[i] = i
		}
	}
	return &resources{cpus: cpus[:cores], bind: bind, gpus: gpus, busyCPU: map[int]bool{},
		gpuUsed: map[string]int{}, gpuPool: map[string]int{}, memoryMB: memoryMB}
}

// need is what a task asks for: its limits, else a slot's share of the
// CPUs (none when the worker has more slots than CPUs: such tasks share
// the CPUs left, unbound, as the configuration asked), and a GPU when it
// requires one without saying how many. gpus is in units of
// schema.GPUShareStep.
func (r *resources) need(t *schema.NodeTask, slots int) (cpus, gpus int) {
	cpus = t.Limits.CPUs
	if cpus <= 0 {
		cpus = len(r.cpus) / max(1, slots)
	}
	if t.Limits.MultiNode() {
		cpus = len(r.cpus) // the allocation is the task's: its ranks use this node's CPUs too
	}
	gpus = t.Limits.GPUUnits()
	if gpus <= 0 && len(r.gpus) > 0 && (slices.Contains(t.Requires, "gpu") || slices.Contains(t.Requires, "nvcc")) {
		gpus = wholeGPU
	}
	return cpus, gpus
}

// exceeds says why the task can never run on this worker, or "".
func (r *resources) exceeds(t *schema.NodeTask, slots int) string {
	cpus, gpus := r.need(t, slots)
	switch {
	case cpus > len(r.cpus):
		return fmt.Sprintf("it needs %d CPUs (limits.cpus) and the worker has %d", cpus, len(r.cpus))
	case gpus > len(r.gpus)*wholeGPU:
		return fmt.Sprintf("it needs %s GPUs (limits.gpus) and the worker has %d", gpuAmount(gpus), len(r.gpus))
	case r.memoryMB > 0 && t.Limits.MemoryMB > r.memoryMB:
		return fmt.Sprintf("it needs %d MB of memory (limits.memory_mb) and the worker has %d MB", t.Limits.MemoryMB, r.memoryMB)
	}
	return ""
}

// gpuAmount writes units of schema.GPUShareStep as a number of GPUs.
func gpuAmount(units int) string {
	return strconv.FormatFloat(float64(units)/wholeGPU, 'f', -1, 64)
}

// take reserves the task's CPUs and GPUs; ok is false when they are not
// free now (other tasks hold them). A share of a GPU goes to the GPU the
// other shares use most that still has room for it (best fit, so that
// whole GPUs stay free for the tasks that need them), else to a free one.
func (r *resources) take(t *schema.NodeTask, slots int) (g grant, ok bool) {
	nc, ng := r.need(t, slots)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.cpus {
		if len(g.cpus) == nc {
			break
		}
		if !r.busyCPU[c] {
			g.cpus = append(g.cpus, c)
		}
	}
	if len(g.cpus) < nc {
		return grant{}, false
	}
	switch {
	case ng >= wholeGPU:
		for _, id := range r.gpus {
			if len(g.gpus) == ng/wholeGPU {
				break
			}
			if r.gpuUsed[id] == 0 {
				g.gpus = append(g.gpus, id)
			}
		}
		if len(g.gpus) < ng/wholeGPU {
			return grant{}, false
		}
		g.units = wholeGPU
	case ng > 0:
		best := ""
		for _, id := range r.gpus {
			if u := r.gpuUsed[id]; u+ng <= wholeGPU && (best == "" || u > r.gpuUsed[best]) {
				best = id
			}
		}
		if best == "" {
			return grant{}, false
		}
		g.gpus, g.units = []string{best}, ng
	}
	for _, c := range g.cpus {
		r.busyCPU[c] = true
	}
	for _, id := range g.gpus {
		r.gpuUsed[id] += g.units
	}
	g.pool = t.Pool
	r.gpuPool[g.pool] += g.units * len(g.gpus)
	return g, true
}

// give returns what take reserved.
func (r *resources) give(g grant) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range g.cpus {
		delete(r.busyCPU, c)
	}
	for _, id := range g.gpus {
		if r.gpuUsed[id] -= g.units; r.gpuUsed[id] <= 0 {
			delete(r.gpuUsed, id)
		}
	}
	if r.gpuPool[g.pool] -= g.units * len(g.gpus); r.gpuPool[g.pool] <= 0 {
		delete(r.gpuPool, g.pool)
	}
}

// gpusInUse is how many GPUs the running tasks of each pool hold (shares
// add up: two tasks of 0.5 hold one).
func (r *resources) gpusInUse() map[string]float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]float64, len(r.gpuPool))
	for p, u := range r.gpuPool {
		out[p] = float64(u) / wholeGPU
	}
	return out
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
