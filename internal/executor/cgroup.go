package executor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// v2Cgroups limit tasks with a cgroup v2 child per task (memory.max,
// pids.max), created beside the worker's own cgroup where that parent has
// the memory or pids controller on for its children and the worker may
// write it: a Slurm job's step under cgroup/v2 ("user" is delegated), a
// systemd unit with Delegate=yes. The task's processes start in it (clone3
// with CLONE_INTO_CGROUP), so no allocation or fork escapes it.
type v2Cgroups struct {
	parent       string
	memory, pids bool // the controllers on for the parent's children
	seq          atomic.Uint64
}

// detectV2 returns the limiter, or why the worker cannot create v2
// cgroups (the v1 controllers are tried next, RLIMIT_AS and RLIMIT_NPROC
// last).
func detectV2() (*v2Cgroups, string) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, "no /proc/self/cgroup"
	}
	var v2 string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && parts[0] == "0" && parts[1] == "" {
			v2 = parts[2]
		}
	}
	if v2 == "" {
		return nil, "no cgroup v2"
	}
	parent := filepath.Dir(filepath.Join("/sys/fs/cgroup", v2))
	ctl, err := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
	on := " " + strings.TrimSpace(string(ctl)) + " "
	c := &v2Cgroups{parent: parent, memory: strings.Contains(on, " memory "), pids: strings.Contains(on, " pids ")}
	if err != nil || (!c.memory && !c.pids) {
		return nil, "neither the memory nor the pids controller is delegated to " + parent
	}
	probe := filepath.Join(parent, fmt.Sprintf("hpcq-probe-%d", os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil {
		return nil, "cannot create cgroups in " + parent + ": " + err.Error()
	}
	_ = os.Remove(probe)
	return c, ""
}

// taskCgroup is one task's v2 cgroup.
type taskCgroup struct {
	dir          string
	fd           int
	memory, pids bool // limited here
}

// create makes a cgroup limited to mb megabytes (no swap) and maxPids
// processes and threads; a zero is no limit of that kind.
func (m *v2Cgroups) create(mb, maxPids int) (*taskCgroup, error) {
	dir := filepath.Join(m.parent, fmt.Sprintf("hpcq-%d-%d", os.Getpid(), m.seq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	c := &taskCgroup{dir: dir, fd: -1}
	if mb > 0 {
		if err := os.WriteFile(filepath.Join(dir, "memory.max"), []byte(strconv.Itoa(mb<<20)), 0o644); err != nil {
			c.close()
			return nil, fmt.Errorf("memory cgroup: memory.max: %w", err)
		}
		_ = os.WriteFile(filepath.Join(dir, "memory.swap.max"), []byte("0"), 0o644) // absent without swap accounting
		c.memory = true
	}
	if maxPids > 0 {
		if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.Itoa(maxPids)), 0o644); err != nil {
			c.close()
			return nil, fmt.Errorf("pids cgroup: pids.max: %w", err)
		}
		c.pids = true
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		c.close()
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	c.fd = fd
	return c, nil
}

// forksRefused is how many forks pids.max refused.
func (c *taskCgroup) forksRefused() int64 {
	if !c.pids {
		return 0
	}
	return counter(filepath.Join(c.dir, "pids.events"), "max")
}

// peak is the most processes and threads the task had at once (0:
// unknown; pids.peak is in kernels from 6.1).
func (c *taskCgroup) peak() int64 {
	if !c.pids {
		return 0
	}
	return readInt(filepath.Join(c.dir, "pids.peak"))
}

// oomKilled reports whether the kernel killed a process of the cgroup for
// going over its limit.
func (c *taskCgroup) oomKilled() bool {
	return c.memory && counter(filepath.Join(c.dir, "memory.events"), "oom_kill") > 0
}

// close removes the cgroup once its processes are gone (Run kills what a
// command leaves in its process group; a moment may pass before the kernel
// empties the cgroup).
func (c *taskCgroup) close() {
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
	for i := 0; i < 50; i++ {
		err := os.Remove(c.dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
