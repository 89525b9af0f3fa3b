package phases

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

// memCgroups limits the memory of tasks with a cgroup v2 child per task
// (memory.max), created beside the worker's own cgroup where that parent
// has the memory controller on for its children and the worker may write
// it: a Slurm job's step under cgroup/v2 ("user" is delegated), a systemd
// unit with Delegate=yes. The task's processes start in it (clone3 with
// CLONE_INTO_CGROUP), so no allocation escapes it.
type memCgroups struct {
	parent string
	seq    atomic.Uint64
}

// detectMemCgroups returns the limiter, or why the worker cannot create
// memory cgroups (the tasks' memory is then limited by RLIMIT_AS).
func detectMemCgroups() (*memCgroups, string) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, "no /proc/self/cgroup"
	}
	var v2 string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2 = parts[2]
		}
		if strings.Contains(","+parts[1]+",", ",memory,") {
			return nil, "the memory controller is on cgroup v1 here"
		}
	}
	if v2 == "" {
		return nil, "no cgroup v2"
	}
	parent := filepath.Dir(filepath.Join("/sys/fs/cgroup", v2))
	ctl, err := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
	if err != nil || !strings.Contains(" "+strings.TrimSpace(string(ctl))+" ", " memory ") {
		return nil, "the memory controller is not delegated to " + parent
	}
	probe := filepath.Join(parent, fmt.Sprintf("hpcq-probe-%d", os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil {
		return nil, "cannot create cgroups in " + parent + ": " + err.Error()
	}
	_ = os.Remove(probe)
	return &memCgroups{parent: parent}, ""
}

// taskCgroup is one task's memory cgroup.
type taskCgroup struct {
	dir string
	fd  int
}

// create makes a cgroup limited to mb megabytes (no swap).
func (m *memCgroups) create(mb int) (*taskCgroup, error) {
	dir := filepath.Join(m.parent, fmt.Sprintf("hpcq-%d-%d", os.Getpid(), m.seq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("memory cgroup: %w", err)
	}
	c := &taskCgroup{dir: dir, fd: -1}
	if err := os.WriteFile(filepath.Join(dir, "memory.max"), []byte(strconv.Itoa(mb<<20)), 0o644); err != nil {
		c.close()
		return nil, fmt.Errorf("memory cgroup: memory.max: %w", err)
	}
	_ = os.WriteFile(filepath.Join(dir, "memory.swap.max"), []byte("0"), 0o644) // absent without swap accounting
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		c.close()
		return nil, fmt.Errorf("memory cgroup: %w", err)
	}
	c.fd = fd
	return c, nil
}

// oomKilled reports whether the kernel killed a process of the cgroup for
// going over its limit.
func (c *taskCgroup) oomKilled() bool {
	data, err := os.ReadFile(filepath.Join(c.dir, "memory.events"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "oom_kill" && f[1] != "0" {
			return true
		}
	}
	return false
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
