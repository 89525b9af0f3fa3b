// Package testutil starts the real servers tests run against: an embedded
// nats-server and the nats-server binary through scripts/services.sh, each
// on a private loopback port under the test's temp dir, stopped by its own
// pid when the test ends.
package testutil

import (
	"bufio"
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/queue/embedded"
)

// RepoRoot is the directory holding go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test's directory")
		}
		dir = parent
	}
}

// Logger sends slog output to t.Log.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tlogWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tlogWriter struct{ t testing.TB }

func (w tlogWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// NATS is a running server of one kind.
type NATS struct {
	// Kind is "embedded" or "nats-server".
	Kind string
	// URL clients connect to.
	URL string
	// PID of the nats-server process (0 for embedded).
	PID int
	// Dir holds the server's files.
	Dir  string
	stop func()
}

// Stop stops the server (the test's cleanup does it too).
func (n *NATS) Stop() { n.stop() }

// Connect opens a client connection, closed when the test ends.
func (n *NATS) Connect(t testing.TB) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(n.URL, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatalf("connect to %s server: %v", n.Kind, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Queue connects and returns a Queue with opts.
func (n *NATS) Queue(t testing.TB, opts queue.Options) *queue.Queue {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q, err := queue.New(ctx, n.Connect(t), opts, Logger(t))
	if err != nil {
		t.Fatalf("queue on %s: %v", n.Kind, err)
	}
	return q
}

// ServerKinds are the two kinds every queue behaviour is tested on.
var ServerKinds = []string{"embedded", "nats-server"}

// StartNATS starts a server of the given kind.
func StartNATS(t testing.TB, kind string) *NATS {
	t.Helper()
	switch kind {
	case "embedded":
		return startEmbedded(t)
	case "nats-server":
		return startBinary(t)
	}
	t.Fatalf("unknown server kind %q", kind)
	return nil
}

func startEmbedded(t testing.TB) *NATS {
	dir := t.TempDir()
	e, err := embedded.Start(embedded.Options{StoreDir: dir, Listen: true})
	if err != nil {
		t.Fatalf("embedded server: %v", err)
	}
	n := &NATS{Kind: "embedded", URL: e.ClientURL(), Dir: dir}
	stopped := false
	n.stop = func() {
		if !stopped {
			stopped = true
			e.Shutdown()
		}
	}
	t.Cleanup(n.stop)
	return n
}

// RequireBinary skips the test when bin is missing outside CI, and fails
// it in CI, where `make test` must have installed it.
func RequireBinary(t testing.TB, bin, install string) {
	t.Helper()
	if _, err := exec.LookPath(bin); err == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not installed; `make test` installs it with %s", bin, install)
	}
	t.Skipf("%s is not installed (run %s, or make test)", bin, install)
}

// Services runs scripts/services.sh with args and returns its stdout.
func Services(t testing.TB, args ...string) string {
	t.Helper()
	return services(t, nil, args...)
}

// services is Services with env added to this process's environment.
func services(t testing.TB, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(RepoRoot(t), "scripts", "services.sh"), args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("services.sh %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

// ParseEnv reads KEY=VALUE lines.
func ParseEnv(s string) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "="); ok {
			m[k] = v
		}
	}
	return m
}

func startBinary(t testing.TB) *NATS {
	RequireBinary(t, "nats-server", "scripts/services.sh install nats")
	dir := t.TempDir()
	// At debug level: a failed test's excerpt of the log (below) then says
	// why the server closed a client's connection.
	services(t, []string{"HPCQ_NATS_DEBUG=1"}, "start", "nats", dir)
	data, err := os.ReadFile(filepath.Join(dir, "nats.env"))
	if err != nil {
		t.Fatalf("services.sh start nats wrote no env file: %v", err)
	}
	env := ParseEnv(string(data))
	pid, _ := strconv.Atoi(env["HPCQ_NATS_PID"])
	if env["HPCQ_NATS_URL"] == "" || pid == 0 {
		t.Fatalf("services.sh start nats printed no URL or pid: %v", env)
	}
	n := &NATS{Kind: "nats-server", URL: env["HPCQ_NATS_URL"], PID: pid, Dir: dir}
	n.stop = func() { Services(t, "stop", "nats", dir) }
	t.Cleanup(n.stop)
	t.Cleanup(func() { // runs first: what the server said, for a test that failed
		if !t.Failed() {
			return
		}
		if data, err := os.ReadFile(filepath.Join(dir, "nats.log")); err == nil {
			// At debug level a line per connection opened or closed: 16 KB
			// reach back to a test's start.
			t.Logf("nats-server log (its last 16 KB):\n%s", data[max(0, len(data)-16<<10):])
		}
	})
	return n
}

// ProcessGone reports whether pid no longer runs (or is a zombie).
func ProcessGone(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return true
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// Field 3 is the state; Z is a zombie, X dead.
	if i := bytes.LastIndexByte(data, ')'); i >= 0 && i+2 < len(data) {
		return data[i+2] == 'Z' || data[i+2] == 'X'
	}
	return false
}

// ShellEnv is an environment for commands a test starts: HOME is a fresh
// temp dir, so that bash -l does not read the machine's login profile (a
// profile that takes locks, killed midway by a timeout test, can stall every
// later login shell), and no HPCQ_ variable of the caller leaks in.
func ShellEnv(t testing.TB, extra ...string) []string {
	env := []string{"HOME=" + t.TempDir()}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "HPCQ_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// RequireGone waits up to 10s for each pid to disappear: SIGKILL is
// delivered asynchronously, so a process may show for a moment after kill
// returns.
func RequireGone(t testing.TB, pids ...int) {
	t.Helper()
	for _, pid := range pids {
		Eventually(t, 10*time.Second, "process "+strconv.Itoa(pid)+" to be gone", func() bool { return ProcessGone(pid) })
	}
}

// ProcessesWith returns the pids of the live processes (zombies left out)
// whose command line contains marker: a way to find what a sandboxed
// command started, whose pids are those of another namespace.
func ProcessesWith(marker string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, []byte(marker)) || ProcessGone(pid) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// RequireNoProcessWith waits up to 10s until no live process's command
// line contains marker.
func RequireNoProcessWith(t testing.TB, marker string) {
	t.Helper()
	Eventually(t, 10*time.Second, "no process with "+marker, func() bool { return len(ProcessesWith(marker)) == 0 })
}

// Eventually polls cond every 20ms until it holds or timeout passes.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Server is a server process started through scripts/services.sh.
type Server struct {
	// Env holds what services.sh wrote to <service>.env.
	Env map[string]string
	// PID of the server process.
	PID   int
	Dir   string
	stop  func()
	start func()
}

// Stop stops the server (the test's cleanup does it too).
func (s *Server) Stop() { s.stop() }

// Start starts a stopped server again, in the same directory (its data
// survives) and on the same ports.
func (s *Server) Start() { s.start() }

// StartService starts redis, clickhouse, slurm (or nats) under a temp dir
// through scripts/services.sh, stopped by its pid when the test ends.
func StartService(t testing.TB, service string) *Server {
	t.Helper()
	return StartServiceWith(t, service, nil)
}

// StartServiceWith is StartService with prepare called on the service's
// directory first (prometheus reads its prometheus.yml there).
func StartServiceWith(t testing.TB, service string, prepare func(dir string)) *Server {
	t.Helper()
	bins := map[string]string{"nats": "nats-server", "redis": "redis-server", "clickhouse": "clickhouse-server", "slurm": "slurmctld",
		"prometheus": "prometheus"}
	bin, ok := bins[service]
	if !ok {
		t.Fatalf("unknown service %q", service)
	}
	RequireBinary(t, bin, "scripts/services.sh install "+service)
	dir := t.TempDir()
	if prepare != nil {
		prepare(dir)
	}
	s := &Server{Dir: dir}
	stopped := true
	s.start = func() {
		t.Helper()
		Services(t, "start", service, dir)
		data, err := os.ReadFile(filepath.Join(dir, service+".env"))
		if err != nil {
			t.Fatalf("services.sh start %s wrote no env file: %v", service, err)
		}
		s.Env = ParseEnv(string(data))
		for k, v := range s.Env {
			if strings.HasSuffix(k, "_PID") {
				s.PID, _ = strconv.Atoi(v)
			}
		}
		stopped = false
	}
	s.stop = func() {
		if !stopped {
			stopped = true
			Services(t, "stop", service, dir)
		}
	}
	s.start()
	t.Cleanup(s.stop)
	return s
}

// ReplaceWithCopy replaces the file at path by a copy of itself: the same
// bytes in another file (another inode), as a run directory written anew
// has.
func ReplaceWithCopy(t testing.TB, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".copy", data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".copy", path); err != nil {
		t.Fatal(err)
	}
}
