package executor

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/schema"
)

// How a task's process limit is enforced (schema.Enforced.PidsBy).
const (
	pidsByCgroup   = "cgroup"    // cgroup v2 pids.max
	pidsByCgroupV1 = "cgroup-v1" // cgroup v1 pids.max
	pidsByRlimit   = "rlimit"    // RLIMIT_NPROC of the slot's own uid
)

// enforce applies the slot's resources to the task's commands: its CPUs
// (affinity), its process limit (a cgroup's pids.max, else RLIMIT_NPROC
// where the slot has a uid of its own), its memory limit (a cgroup where
// the worker may create one, else RLIMIT_AS), and says how in the result.
// run.release undoes it.
//
// Long: one block per limit (CPUs, processes, memory), each with its
// fallback and the words the result uses for it.
func (e *Executor) enforce(t *schema.NodeTask, slot worker.Slot, run *phaseRun) *schema.Enforced {
	enf := &schema.Enforced{DiskMB: run.diskMB}
	e.gpuEnforced(slot, enf)
	mpiEnforced(slot, enf)
	var notes []string
	if len(slot.CPUs) > 0 {
		run.cpus = slot.CPUs
		enf.CPUs = worker.CPUList(slot.CPUs)
	} else if t.Limits.CPUs > 0 {
		notes = append(notes, "CPUs counted, not bound: the worker was given more cores than it may run on")
	}
	pids := cmpOr(t.Limits.Pids, e.cfg.Pids, DefaultPids())
	mb := slot.MemoryMB

	// cgroup v2 first, for what its parent delegates; v1 for the rest.
	var v2MB, v2Pids int
	if e.v2 != nil && e.v2.memory {
		v2MB = mb
	}
	if e.v2 != nil && e.v2.pids {
		v2Pids = pids
	}
	if v2MB > 0 || v2Pids > 0 {
		cg, err := e.v2.create(v2MB, v2Pids)
		if err != nil {
			notes = append(notes, err.Error())
		} else {
			run.cgroup = cg
			if cg.pids {
				run.pids, run.pidsBy = pids, pidsByCgroup
			}
			if cg.memory {
				run.memory = "cgroup"
			}
		}
	}
	var v1Pids, v1MB int
	if run.pidsBy == "" {
		v1Pids = pids
	}
	if run.memory == "" {
		v1MB = mb
	}
	if e.v1 != nil && (v1Pids > 0 || v1MB > 0) {
		v1, err := e.v1.create(v1Pids, v1MB)
		if err != nil {
			notes = append(notes, err.Error())
		} else {
			run.v1 = v1
			if v1.pids != "" {
				run.pids, run.pidsBy = pids, pidsByCgroupV1
			}
			if v1.memory != "" {
				run.memory = "cgroup-v1"
			}
		}
	}
	if run.pidsBy == "" {
		why := strings.Trim(e.v2Why+"; "+e.v1Why, "; ")
		if why == "" {
			why = "no pids cgroup"
		}
		if run.user != nil {
			// The slot's uid is its alone: its process count is the task's.
			run.pids, run.pidsBy = pids, pidsByRlimit
			run.user.Nproc = pids
			notes = append(notes, fmt.Sprintf("process limit as RLIMIT_NPROC of the slot's own uid %d because %s", run.user.UID, why))
		} else {
			notes = append(notes, "no process limit: "+why+" (HPCQ_SANDBOX_UIDS gives each slot a uid of its own, limited by RLIMIT_NPROC)")
		}
	}
	enf.Pids, enf.PidsBy = run.pids, run.pidsBy
	if mb > 0 {
		run.memoryMB, enf.MemoryMB = mb, mb
		if run.memory == "" {
			run.memory = "rlimit"
			if run.rlimits.AddressSpaceMB == 0 || run.rlimits.AddressSpaceMB > mb {
				run.rlimits.AddressSpaceMB = mb
			}
			why := strings.Trim(e.v2Why+"; "+e.v1Why, "; ")
			if why == "" {
				why = "no memory cgroup"
			}
			notes = append(notes, "memory limited as RLIMIT_AS (virtual memory of each process: the last resort) because "+why)
		}
		enf.Memory = run.memory
	}
	enf.Note = strings.Join(notes, "; ")
	if enf.CPUs == "" && enf.Memory == "" && len(enf.GPUs) == 0 && enf.Pids == 0 && enf.DiskMB == 0 && enf.Note == "" && enf.Nodes == 0 {
		return nil
	}
	return enf
}

// release ends the attempt's sandbox, records the task's peak process
// count in res and removes its cgroups.
func (run *phaseRun) release(res *schema.NodeResult) {
	run.box.close()
	if res != nil && res.Limits != nil {
		switch {
		case run.cgroup != nil && run.cgroup.pids:
			res.Limits.PidsPeak = run.cgroup.peak()
		case run.v1 != nil:
			res.Limits.PidsPeak = run.v1.peak()
		}
	}
	if run.cgroup != nil {
		run.cgroup.close()
	}
	if run.v1 != nil {
		run.v1.close()
	}
}

// cmpOr is the first of vs above zero, else 0.
func cmpOr(vs ...int) int {
	for _, v := range vs {
		if v > 0 {
			return v
		}
	}
	return 0
}

// DefaultPids is a task's process limit when neither it nor the worker
// sets one: 1024, or 32 per core of the node where that is more (an MPI
// rank per core with its own threads on a large node).
func DefaultPids() int { return max(1024, 32*runtime.NumCPU()) }

// pidsReason says when the task's process limit refused forks: the
// cgroup's count, or (RLIMIT_NPROC, which counts nothing) the shell's
// words for a refused fork in the log.
func pidsReason(run phaseRun, pr schema.PhaseResult) string {
	var n int64
	switch run.pidsBy {
	case pidsByCgroup:
		n = run.cgroup.forksRefused()
	case pidsByCgroupV1:
		n = run.v1.forksRefused()
	case pidsByRlimit:
		if strings.Contains(pr.LogTail, "fork: ") && strings.Contains(pr.LogTail, "Resource temporarily unavailable") {
			return fmt.Sprintf("; the task's process limit (limits.pids = %d, RLIMIT_NPROC of uid %d) refused forks", run.pids, run.user.UID)
		}
	}
	if n > 0 {
		mech := "cgroup pids.max"
		if run.pidsBy == pidsByCgroupV1 {
			mech = "cgroup v1 pids.max"
		}
		return fmt.Sprintf("; the task's process limit (limits.pids = %d, %s) refused %d forks", run.pids, mech, n)
	}
	return ""
}

// memoryReason says when a failed command met the task's memory limit: the
// cgroup's OOM kill, or (RLIMIT_AS) the signs of an allocation refused.
func memoryReason(run phaseRun, pr schema.PhaseResult) string {
	switch run.memory {
	case "cgroup":
		if run.cgroup.oomKilled() {
			return fmt.Sprintf("; killed by the task's memory limit (limits.memory_mb = %d MB, cgroup memory.max)", run.memoryMB)
		}
	case "cgroup-v1":
		if run.v1.oomKilled() {
			return fmt.Sprintf("; killed by the task's memory limit (limits.memory_mb = %d MB, cgroup v1 memory.limit_in_bytes)", run.memoryMB)
		}
	case "rlimit":
		tail := strings.ToLower(pr.LogTail)
		if pr.ExitCode == 134 || pr.ExitCode == 137 || pr.ExitCode == 139 || strings.Contains(tail, "memory") || strings.Contains(tail, "bad_alloc") {
			return fmt.Sprintf("; the task's memory limit (limits.memory_mb = %d MB, as RLIMIT_AS) refuses allocations beyond it", run.memoryMB)
		}
	}
	return ""
}
