package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/netns"
	"github.com/hpcq/hpcq/internal/testutil"
)

// slurmCluster is a Slurm of several hosts started with
// scripts/services.sh: munged and slurmctld on the head host, munged and a
// slurmd on each compute host (node name: its hostname, node address: its
// address). Every host shares the configuration DIR/slurm.conf and the
// munge key, as a cluster's shared file system would hold them; what a
// node keeps on its own disk (its munge socket, slurmd's pid file, spool
// and log) is in a directory of its own, bound at DIR/host.
type slurmCluster struct {
	dir   string
	head  *netns.Host
	nodes []*netns.Host
	env   map[string]string // SLURM_CONF, HPCQ_SLURM_PARTITION...
	own   map[*netns.Host]string
}

// startSlurmHosts starts the controller on head and a slurmd on each node;
// everything is stopped (by its pids) when the test ends.
func startSlurmHosts(t *testing.T, head *netns.Host, nodes ...*netns.Host) *slurmCluster {
	t.Helper()
	testutil.RequireBinary(t, "slurmctld", "scripts/services.sh install slurm")
	c := &slurmCluster{dir: t.TempDir(), head: head, nodes: nodes, own: map[*netns.Host]string{}}
	var list []string
	for _, n := range nodes {
		list = append(list, n.Name+"="+n.Addr)
		own := t.TempDir()
		require.NoError(t, os.Chmod(own, 0o755))
		n.Bind(own, filepath.Join(c.dir, "host"))
		c.own[n] = own
	}
	// A silent node is down after 20 s: a killed host's jobs end then.
	c.env = serviceOn(t, head, c.dir, "start", "slurm", "HPCQ_SLURM_NODES="+strings.Join(list, ","),
		"HPCQ_SLURM_CPUS=2", "HPCQ_SLURMD_TIMEOUT=20")
	t.Cleanup(func() {
		serviceOn(t, head, c.dir, "stop", "slurm")
		for _, n := range nodes {
			serviceOn(t, n, c.dir, "stop", "slurmd")
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			for _, f := range []string{"slurmctld.log", "jobcomp.txt"} {
				data, _ := os.ReadFile(filepath.Join(c.dir, "log", f))
				t.Logf("%s:\n%s", f, data)
			}
			for _, n := range nodes {
				for _, f := range []string{"slurmd.log", "slurmd.out", "munged.log"} {
					data, _ := os.ReadFile(filepath.Join(c.own[n], "log", f))
					t.Logf("%s's %s:\n%s", n.Name, f, data)
				}
			}
		}
	})
	for _, n := range nodes {
		c.startNode(t, n)
	}
	return c
}

// startNode starts n's munged and slurmd (again, after a host kill).
func (c *slurmCluster) startNode(t *testing.T, n *netns.Host) {
	t.Helper()
	serviceOn(t, n, c.dir, "start", "slurmd")
}

// cmd runs a Slurm client command on the head host.
func (c *slurmCluster) cmd(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := c.head.Command(name, args...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+c.env["SLURM_CONF"])
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %v: %s", name, args, out)
	return strings.TrimSpace(string(out))
}

// nodeStates maps each node to its state (sinfo).
func (c *slurmCluster) nodeStates(t *testing.T) map[string]string {
	t.Helper()
	states := map[string]string{}
	for _, l := range strings.Split(c.cmd(t, "sinfo", "-h", "-N", "-o", "%N %T"), "\n") {
		if n, s, ok := strings.Cut(l, " "); ok {
			states[n] = s
		}
	}
	return states
}

// headAndComputes are the hosts head, compute1 and compute2 of a network
// of the test's own, removed when it ends.
func headAndComputes(t *testing.T) []*netns.Host {
	t.Helper()
	nw, err := netns.New()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, nw.Close()) })
	var hosts []*netns.Host
	for _, name := range []string{"head", "compute1", "compute2"} {
		h, err := nw.AddHost(name)
		require.NoError(t, err)
		hosts = append(hosts, h)
	}
	return hosts
}

// jobOutputs are the Slurm jobs' output files (*.out) in dir, each under
// its name.
func jobOutputs(dir string) string {
	var b strings.Builder
	files, _ := filepath.Glob(filepath.Join(dir, "*.out"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		fmt.Fprintf(&b, "== %s\n%s", filepath.Base(f), data)
	}
	return b.String()
}

// TestSlurmAcrossHosts: a controller on one host and a slurmd on each of
// two others: jobs land on both compute hosts and run there (their
// hostname); a compute host killed whole takes its job with it, and the
// node, booted again, takes jobs again.
func TestSlurmAcrossHosts(t *testing.T) {
	requireNetns(t)
	t.Parallel()
	hosts := headAndComputes(t)
	c := startSlurmHosts(t, hosts[0], hosts[1], hosts[2])
	require.Equal(t, map[string]string{"compute1": "idle", "compute2": "idle"}, c.nodeStates(t))

	out := t.TempDir()
	submit := func(name string) string {
		return c.cmd(t, "sbatch", "--parsable", "-c", "2", "-J", name, "-o", filepath.Join(out, "%x.out"),
			"--wrap", "hostname; sleep 600")
	}
	jobs := []string{submit("a"), submit("b")}
	where := map[string]string{} // job -> node
	testutil.Eventually(t, time.Minute, "both jobs running, one on each compute host", func() bool {
		for _, j := range jobs {
			f := strings.Fields(c.cmd(t, "squeue", "-h", "-j", j, "-o", "%T %N"))
			if len(f) != 2 || f[0] != "RUNNING" {
				return false
			}
			where[j] = f[1]
		}
		return where[jobs[0]] != where[jobs[1]]
	})
	for j, name := range map[string]string{jobs[0]: "a", jobs[1]: "b"} {
		testutil.Eventually(t, 30*time.Second, "job "+name+"'s output", func() bool {
			data, _ := os.ReadFile(filepath.Join(out, name+".out"))
			return strings.TrimSpace(string(data)) == where[j]
		})
	}

	// compute1 dies whole (munged, slurmd, the job); the controller
	// notices, the job ends; the host boots, the node takes jobs again.
	victim := jobs[0]
	if where[jobs[1]] == "compute1" {
		victim = jobs[1]
	}
	hosts[1].Kill()
	testutil.Eventually(t, time.Minute, "the controller to see compute1 down", func() bool {
		return strings.HasPrefix(c.nodeStates(t)["compute1"], "down")
	})
	c.startNode(t, hosts[1])
	testutil.Eventually(t, time.Minute, "the killed job to end and compute1 to take jobs", func() bool {
		state := c.cmd(t, "squeue", "-h", "-t", "all", "-j", victim, "-o", "%T")
		return state != "RUNNING" && c.nodeStates(t)["compute1"] == "idle"
	})
	j := submit("c")
	testutil.Eventually(t, time.Minute, "a new job running on compute1", func() bool {
		return c.cmd(t, "squeue", "-h", "-j", j, "-o", "%T %N") == "RUNNING compute1"
	})
	fmt.Printf("slurm across hosts: nodes=%d jobs=%d\n", len(c.nodes), 3)
}
