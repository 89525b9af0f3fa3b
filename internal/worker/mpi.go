package worker

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/hpcq/hpcq/pkg/schema"
)

// ErrNodeLost wraps an executor's error for a multi-node task whose run
// failed because a node of the allocation was lost: the task goes back to
// the queue at once, and the worker, whose allocation is broken, drains
// (slurm-bridge starts another).
var ErrNodeLost = errors.New("a node of the allocation was lost")

// MPIShape is where a multi-node task's ranks go and the command line that
// launches them: what its commands find in HPCQ_HOSTS, HPCQ_NODES,
// HPCQ_RANKS_PER_NODE, HPCQ_RANKS, HPCQ_CPUS_PER_RANK and HPCQ_MPIRUN.
type MPIShape struct {
	Hosts        []string
	RanksPerNode int
	CPUsPerRank  int
	// Launch is the prefix of a command that runs a program as the task's
	// ranks ($HPCQ_MPIRUN ./prog).
	Launch string
}

// Ranks is the number of ranks in all.
func (m *MPIShape) Ranks() int { return len(m.Hosts) * m.RanksPerNode }

// MPILaunch is the launch prefix for ranksPerNode ranks of cpusPerRank
// CPUs on each of hosts, inside the worker's Slurm allocation, for the MPI
// the worker found (its "mpi" toolchain): Open MPI's mpirun (which starts
// its daemons on the other nodes through the allocation) with the hosts
// and slots named and each line of output tagged with its rank; MPICH's
// mpiexec (Hydra, through Slurm as well); else srun, whose ranks need an
// MPI built with Slurm's PMI.
func MPILaunch(mpi string, hosts []string, ranksPerNode, cpusPerRank int) string {
	n := len(hosts) * ranksPerNode
	switch {
	case strings.HasPrefix(mpi, "Open MPI"):
		slots := make([]string, len(hosts))
		for i, h := range hosts {
			slots[i] = h + ":" + strconv.Itoa(ranksPerNode)
		}
		bind := "--bind-to none"
		if cpusPerRank > 1 {
			bind = fmt.Sprintf("--map-by ppr:%d:node:pe=%d --bind-to core", ranksPerNode, cpusPerRank)
		}
		return fmt.Sprintf("mpirun -np %d --host %s %s --tag-output", n, strings.Join(slots, ","), bind)
	case strings.HasPrefix(mpi, "MPICH"):
		return fmt.Sprintf("mpiexec -n %d -ppn %d -hosts %s -prepend-rank", n, ranksPerNode, strings.Join(hosts, ","))
	}
	return fmt.Sprintf("srun --nodes=%d --ntasks-per-node=%d --cpus-per-task=%d --nodelist=%s --kill-on-bad-exit=1 --label",
		len(hosts), ranksPerNode, max(1, cpusPerRank), strings.Join(hosts, ","))
}

// multiNodeUnfit says why the worker cannot run t's ranks, or "" (also for
// a task of one node).
func (w *Worker) multiNodeUnfit(t *schema.NodeTask) string {
	l := t.Limits
	if !l.MultiNode() {
		return ""
	}
	have := max(1, len(w.cfg.Hosts))
	switch {
	case l.Nodes > have:
		return fmt.Sprintf("it needs %d nodes (limits.nodes) and the worker's allocation has %d", l.Nodes, have)
	case w.cfg.MultiNodeRefusal != "":
		return w.cfg.MultiNodeRefusal
	case max(1, l.RanksPerNode)*max(1, l.CPUsPerRank) > w.cfg.Cores:
		return fmt.Sprintf("it needs %d CPUs a node (limits.ranks_per_node x cpus_per_rank) and the allocation's nodes have %d",
			max(1, l.RanksPerNode)*max(1, l.CPUsPerRank), w.cfg.Cores)
	}
	return ""
}

// mpiShape is where t's ranks go: the first limits.nodes hosts of the
// allocation, or this one for a task of one node that says how many ranks
// it runs (limits.ranks_per_node); nil for a task that says neither.
func (w *Worker) mpiShape(t *schema.NodeTask) *MPIShape {
	l := t.Limits
	var hosts []string
	switch {
	case l.MultiNode() && len(w.cfg.Hosts) >= l.Nodes:
		hosts = w.cfg.Hosts[:l.Nodes]
	case l.MultiNode() || l.RanksPerNode <= 0:
		return nil
	case len(w.cfg.Hosts) > 0:
		hosts = w.cfg.Hosts[:1]
	default:
		hosts = []string{w.host}
	}
	m := &MPIShape{Hosts: hosts, RanksPerNode: max(1, l.RanksPerNode), CPUsPerRank: max(1, l.CPUsPerRank)}
	m.Launch = MPILaunch(w.cfg.Toolchains["mpi"], m.Hosts, m.RanksPerNode, l.CPUsPerRank)
	return m
}
