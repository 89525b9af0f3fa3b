package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hpcq/hpcq/internal/netns"
	"github.com/hpcq/hpcq/internal/testutil"
)

func TestScratchMPI(t *testing.T) {
	requireNetns(t)
	nw, _ := netns.New()
	t.Cleanup(func() { nw.Close() })
	var hosts []*netns.Host
	for _, name := range []string{"head", "compute1", "compute2"} {
		h, _ := nw.AddHost(name)
		hosts = append(hosts, h)
	}
	c := startSlurmHosts(t, hosts[0], hosts[1], hosts[2])
	out := t.TempDir()
	os.Chmod(out, 0o777)
	os.Chmod(filepath.Dir(out), 0o755)
	os.Chmod(c.dir, 0o755)
	prog := filepath.Join(out, "p.c")
	os.WriteFile(prog, []byte("#include <mpi.h>\n#include <stdio.h>\n#include <unistd.h>\nint main(int c,char**v){MPI_Init(&c,&v);int r,n;char h[64];MPI_Comm_rank(MPI_COMM_WORLD,&r);MPI_Comm_size(MPI_COMM_WORLD,&n);gethostname(h,64);printf(\"rank %d of %d on %s\\n\",r,n,h);MPI_Finalize();return 0;}\n"), 0o644)
	cmd := hosts[0].Command("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", "sbatch", "--parsable", "-N2", "--ntasks-per-node=2", "-o", filepath.Join(out, "j.out"),
		"--wrap", "cd "+out+" && mpicc -o p p.c && env | grep SLURM_ | sort; mpirun -np 4 --map-by ppr:2:node ./p; echo srun:; srun -N2 --ntasks-per-node=1 hostname")
	cmd.Env = append(os.Environ(), "SLURM_CONF="+c.env["SLURM_CONF"])
	o, err := cmd.CombinedOutput()
	t.Logf("sbatch: %s %v", o, err)
	testutil.Eventually(t, 2*time.Minute, "done", func() bool {
		return strings.TrimSpace(c.cmd(t, "squeue", "-h")) == ""
	})
	data, _ := os.ReadFile(filepath.Join(out, "j.out"))
	t.Logf("out:\n%s", data)
}
