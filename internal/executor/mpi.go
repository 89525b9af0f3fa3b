package executor

import (
	"strconv"
	"strings"

	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/schema"
)

// mpiEnv is what a multi-node task's commands are told of their ranks: the
// hosts (in rank order), their numbers, and the launch prefix
// ($HPCQ_MPIRUN ./prog runs the program as every rank, across the hosts);
// each rank's threads are its CPUs. None for a task of one node.
func mpiEnv(slot worker.Slot) []string {
	m := slot.MPI
	if m == nil {
		return nil
	}
	return []string{"HPCQ_HOSTS=" + strings.Join(m.Hosts, ","), "HPCQ_NODES=" + strconv.Itoa(len(m.Hosts)),
		"HPCQ_RANKS_PER_NODE=" + strconv.Itoa(m.RanksPerNode), "HPCQ_RANKS=" + strconv.Itoa(m.Ranks()),
		"HPCQ_CPUS_PER_RANK=" + strconv.Itoa(m.CPUsPerRank), "HPCQ_MPIRUN=" + m.Launch,
		"OMP_NUM_THREADS=" + strconv.Itoa(m.CPUsPerRank)}
}

// mpiEnforced says in the result where the ranks went.
func mpiEnforced(slot worker.Slot, enf *schema.Enforced) {
	if m := slot.MPI; m != nil {
		enf.Nodes, enf.Ranks, enf.Hosts, enf.MPILaunch = len(m.Hosts), m.Ranks(), m.Hosts, m.Launch
	}
}
