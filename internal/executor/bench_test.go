package executor

import (
	"context"
	"io"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/schema"
)

// BenchmarkSpawn splits the cost of a task that runs /bin/true: a plain
// spawn of the same command line (the baseline), the same through Run
// (process group, pipe, reaping), through Run in the sandbox (namespaces
// made by this test binary started again; with and without a network
// namespace), and a whole Execute (fresh workspace, log files, sandboxed
// Run), an attempt's sandbox running 1 and 10 commands (helper started
// once), and a whole Execute (fresh workspace, log files, the attempt's
// sandbox). HOME is a temp dir so the machine's login profile does not
// dominate. The helper is hpcq-sandbox where it lies beside the test
// binary (go test -c, then copy it there), else the test binary.
//
//	go test -run '^$' -bench Spawn -benchtime 500x ./internal/executor
func BenchmarkSpawn(b *testing.B) {
	b.Setenv("HOME", b.TempDir())
	argv := ShellArgv("/bin/true", false)
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command(argv[0], argv[1:]...).Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("run", func(b *testing.B) {
		env := os.Environ()
		for b.Loop() {
			if _, err := Run(context.Background(), Command{Line: "/bin/true", Env: env, Stdout: io.Discard}); err != nil {
				b.Fatal(err)
			}
		}
	})
	sb, why, err := NewSandbox(context.Background(), SandboxConfig{}, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		noNet bool
	}{{"sandbox", false}, {"sandbox-nonet", true}} {
		b.Run(c.name, func(b *testing.B) {
			if sb == nil {
				b.Skipf("no sandbox here: %s", why)
			}
			env, dir := os.Environ(), b.TempDir()
			for b.Loop() {
				o, err := Run(context.Background(), Command{Line: "/bin/true", Dir: dir, Env: env, Stdout: io.Discard, Sandbox: sb, NoNetwork: c.noNet})
				if err != nil || o.ExitCode != 0 {
					b.Fatal(err, o.ExitCode)
				}
			}
		})
	}
	for _, n := range []int{1, 10} {
		b.Run("session-"+strconv.Itoa(n), func(b *testing.B) {
			if sb == nil {
				b.Skipf("no sandbox here: %s", why)
			}
			env, dir := os.Environ(), b.TempDir()
			for b.Loop() {
				box := &attemptSandbox{}
				for range n {
					o, err := box.run(context.Background(), Command{Line: "/bin/true", Dir: dir, Env: env, Stdout: io.Discard, Sandbox: sb})
					if err != nil || o.ExitCode != 0 {
						b.Fatal(err, o.ExitCode)
					}
				}
				box.close()
			}
		})
	}
	b.Run("execute", func(b *testing.B) {
		e, err := NewExecutor(Config{RunsDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		i := 0
		for b.Loop() {
			i++
			t := &schema.NodeTask{V: 1, RunID: "bench", NodeID: "n" + strconv.Itoa(i), Attempt: 1, Pool: "cpu",
				Artifacts: schema.Artifacts{Run: schema.RunPhase{Commands: []string{"/bin/true"}}}}
			res, err := e.Execute(context.Background(), t, worker.Slot{Cores: 1})
			if err != nil || res.Error != nil {
				b.Fatal(err, res.Error)
			}
		}
	})
}
