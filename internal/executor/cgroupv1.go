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
)

// v1Cgroups limits a task's processes (pids.max) and, where the memory
// controller is on cgroup v1 (these machines; many clusters), its memory
// (memory.limit_in_bytes, swap included where accounted), with a child
// per task beside the worker's own cgroup in each hierarchy. There is no
// CLONE_INTO_CGROUP on v1: the sandbox helper joins the task's cgroups
// itself, before it starts the command, so nothing the command forks is
// outside them.
type v1Cgroups struct {
	pids, memory string // the parents; "" when that controller cannot be used
	seq          atomic.Uint64
}

// detectV1 finds the worker's own v1 pids and memory cgroups and whether
// it may create children in them; why says what could not be had.
func detectV1() (*v1Cgroups, string) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, "no /proc/self/cgroup"
	}
	c := &v1Cgroups{}
	var whys []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			dst := map[string]*string{"pids": &c.pids, "memory": &c.memory}[ctl]
			if dst == nil {
				continue
			}
			parent := filepath.Join("/sys/fs/cgroup", ctl, parts[2])
			probe := filepath.Join(parent, fmt.Sprintf("hpcq-probe-%d", os.Getpid()))
			if err := os.Mkdir(probe, 0o755); err != nil {
				whys = append(whys, fmt.Sprintf("cannot create %s cgroups in %s: %v", ctl, parent, err))
				continue
			}
			_ = os.Remove(probe)
			*dst = parent
		}
	}
	if c.pids == "" && c.memory == "" {
		if len(whys) == 0 {
			whys = append(whys, "no cgroup v1 pids or memory controller")
		}
		return nil, strings.Join(whys, "; ")
	}
	return c, strings.Join(whys, "; ")
}

// taskV1 is one task's v1 cgroups.
type taskV1 struct {
	pids, memory string // "" when not made
}

// create makes the task's cgroups: at most maxPids processes and threads
// (0: none made), at most memMB megabytes (0: none made).
func (v *v1Cgroups) create(maxPids, memMB int) (*taskV1, error) {
	name := fmt.Sprintf("hpcq-%d-%d", os.Getpid(), v.seq.Add(1))
	t := &taskV1{}
	if maxPids > 0 && v.pids != "" {
		dir := filepath.Join(v.pids, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("pids cgroup: %w", err)
		}
		t.pids = dir
		if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.Itoa(maxPids)), 0o644); err != nil {
			t.close()
			return nil, fmt.Errorf("pids cgroup: pids.max: %w", err)
		}
	}
	if memMB > 0 && v.memory != "" {
		dir := filepath.Join(v.memory, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.close()
			return nil, fmt.Errorf("memory cgroup (v1): %w", err)
		}
		t.memory = dir
		limit := []byte(strconv.Itoa(memMB << 20))
		if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), limit, 0o644); err != nil {
			t.close()
			return nil, fmt.Errorf("memory cgroup (v1): memory.limit_in_bytes: %w", err)
		}
		// Memory and swap together, where swap is accounted: a task does
		// not go on in swap past its limit.
		_ = os.WriteFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), limit, 0o644)
	}
	return t, nil
}

// procs are the cgroup.procs files the command's helper joins.
func (t *taskV1) procs() []string {
	var out []string
	for _, d := range []string{t.pids, t.memory} {
		if d != "" {
			out = append(out, filepath.Join(d, "cgroup.procs"))
		}
	}
	return out
}

// counter reads "key N" from a cgroup file; 0 when absent.
func counter(path, key string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == key {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// oomKilled: the kernel killed a process of the task for its memory limit.
func (t *taskV1) oomKilled() bool {
	return t.memory != "" && counter(filepath.Join(t.memory, "memory.oom_control"), "oom_kill") > 0
}

// forksRefused is how many forks the process limit refused.
func (t *taskV1) forksRefused() int64 {
	if t.pids == "" {
		return 0
	}
	return counter(filepath.Join(t.pids, "pids.events"), "max")
}

// peak is the most processes and threads the task had at once (0 unknown).
func (t *taskV1) peak() int64 {
	if t.pids == "" {
		return 0
	}
	return readInt(filepath.Join(t.pids, "pids.peak"))
}

// readInt reads a file holding one integer; 0 when absent.
func readInt(path string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n
}

// close removes the cgroups once their processes are gone: at once when
// they are (the common case), else in the background, so that a task's
// result does not wait for the kernel to finish its last exits.
func (t *taskV1) close() {
	var left []string
	for _, d := range []string{t.pids, t.memory} {
		if d == "" {
			continue
		}
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			left = append(left, d)
		}
	}
	if len(left) == 0 {
		return
	}
	go func() {
		for _, d := range left {
			for i := 0; i < 100; i++ {
				time.Sleep(20 * time.Millisecond)
				if err := os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
					break
				}
			}
		}
	}()
}
