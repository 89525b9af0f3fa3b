package executor

import (
	"os"
	"strconv"
	"strings"

	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/schema"
)

// mpiEnv is what a multi-node task's commands are told of their ranks: the
// hosts (in rank order), their numbers, and the launch prefix
// ($HPCQ_MPIRUN ./prog runs the program as every rank, across the hosts);
// each rank's threads are its CPUs. None for a task of one node.
//
// Open MPI's mpirun refuses to run as root unless told, and is told: a
// task sees itself as root where the worker runs as root with its
// isolation off (a multi-node task is refused as root otherwise, see
// MultiNodeRefusal), and in a container image.
func mpiEnv(slot worker.Slot) []string {
	m := slot.MPI
	if m == nil {
		return nil
	}
	return []string{"HPCQ_HOSTS=" + strings.Join(m.Hosts, ","), "HPCQ_NODES=" + strconv.Itoa(len(m.Hosts)),
		"HPCQ_RANKS_PER_NODE=" + strconv.Itoa(m.RanksPerNode), "HPCQ_RANKS=" + strconv.Itoa(m.Ranks()),
		"HPCQ_CPUS_PER_RANK=" + strconv.Itoa(m.CPUsPerRank), "HPCQ_MPIRUN=" + m.Launch,
		"OMP_NUM_THREADS=" + strconv.Itoa(m.CPUsPerRank), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"}
}

// mpiEnforced says in the result where the ranks went.
func mpiEnforced(slot worker.Slot, enf *schema.Enforced) {
	if m := slot.MPI; m != nil {
		enf.Nodes, enf.Ranks, enf.Hosts, enf.MPILaunch = len(m.Hosts), m.Ranks(), m.Hosts, m.Launch
	}
}

// nodeLostSigns are what MPI launchers print when a node of the job stops
// answering: Open MPI's mpirun, Slurm's srun. Only words that mean a lost
// node: a task handed back for what is its own fault (a program missing on
// a node: srun's "Task launch ... failed") would come back for ever.
var nodeLostSigns = []string{"ORTE has lost communication with a remote daemon", "srun: error: Node failure on"}

// nodeLost says why a multi-node task's failed run is the allocation's
// doing, not the program's (a host of its ranks was lost), or "": the task
// then goes back to the queue, to run again in an allocation that is whole.
func nodeLost(slot worker.Slot, res *schema.NodeResult) string {
	if slot.MPI == nil || len(slot.MPI.Hosts) < 2 || res == nil || res.Error == nil || res.Error.Phase != schema.PhaseRun {
		return ""
	}
	for _, p := range res.Phases {
		if p.Name != schema.PhaseRun {
			continue
		}
		for _, sign := range nodeLostSigns {
			if i := strings.Index(p.LogTail, sign); i >= 0 {
				line, _, _ := strings.Cut(p.LogTail[i:], "\n")
				return "the run's launcher lost a node of the allocation (" + strings.Join(slot.MPI.Hosts, ", ") + "): " + line
			}
		}
	}
	return ""
}

// MultiNodeRefusal says why a task's commands could not launch ranks on the
// other nodes of the worker's Slurm allocation, or "": Slurm lets only the
// job's owner (or root) start its steps, so a worker running as root whose
// tasks run as another user cannot; run the workers of a multi-node pool
// as the user their jobs belong to.
func (e *Executor) MultiNodeRefusal() string {
	if os.Geteuid() != 0 || e.sandbox == nil {
		return ""
	}
	return "the worker runs as root and its tasks as " + e.sandbox.userName +
		": Slurm lets only the job's owner start its steps (run a multi-node pool's workers as their jobs' user)"
}
