package tests

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/fakellm"
	"github.com/hpcq/hpcq/internal/netns"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/queue"
)

// hostProc is a process started in a host of the test's network.
type hostProc struct {
	*netns.Proc
	testutil.Buffer
}

func (p *hostProc) output() string { return p.String() }

func startOn(t *testing.T, h *netns.Host, env []string, name string, args ...string) *hostProc {
	t.Helper()
	bin := name
	if !filepath.IsAbs(name) {
		bin = filepath.Join(binDir, name)
	}
	p := &hostProc{}
	cmd := h.Command(bin, args...)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, p, p
	var err error
	p.Proc, err = h.Start(cmd)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s on %s:\n%s", filepath.Base(name), h.Name, p.output())
		}
	})
	return p
}

// outputs are the processes' outputs.
func outputs(ps []*hostProc) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.output())
	}
	return out
}

// natsCluster starts a NATS server with JetStream on each host, clustered.
type natsCluster struct {
	hosts []*netns.Host
	confs []string
	urls  []string
	auth  *natsAuth
	procs []*hostProc
}

// natsAuth: the cluster speaks TLS only (clients and routes), with a
// certificate of a test CA for every NATS host's address, and knows one
// user per role, each allowed the subjects docs name for it.
type natsAuth struct {
	ca, key   string
	passwords map[string]string // role -> password
	files     map[string]string // role -> password file (mode 600)
}

// natsPermissions are the NATS users' permissions, as
// deploy/slurm/README.md ("Credentials") documents them.
var natsPermissions = map[string]string{
	// The scheduler declares the streams and buckets and reads everything.
	"scheduler": `{publish: ">", subscribe: ">"}`,
	// A worker pulls tasks and answers them; it cannot publish tasks or
	// change a stream.
	"worker": `{
      publish: {allow: [
        "$JS.API.INFO", "$JS.API.STREAM.INFO.*", "$JS.API.STREAM.NAMES", "$JS.API.STREAM.MSG.GET.*", "$JS.API.DIRECT.GET.>",
        "$JS.API.CONSUMER.INFO.HPCQ_TASKS.*", "$JS.API.CONSUMER.CREATE.HPCQ_TASKS.>", "$JS.API.CONSUMER.DURABLE.CREATE.HPCQ_TASKS.*",
        "$JS.API.CONSUMER.MSG.NEXT.HPCQ_TASKS.*", "$JS.ACK.HPCQ_TASKS.>",
        "$JS.API.CONSUMER.CREATE.KV_HPCQ_CANCELED.>", "$JS.API.CONSUMER.DELETE.KV_HPCQ_CANCELED.*",
        "$JS.API.CONSUMER.CREATE.KV_HPCQ_WORKERS.>", "$JS.API.CONSUMER.DELETE.KV_HPCQ_WORKERS.*", "$JS.FC.>",
        "$KV.HPCQ_WORKERS.>", "$KV.HPCQ_HANDBACKS.>",
        "$O.HPCQ_ARTIFACTS.>", "$JS.API.STREAM.PURGE.OBJ_HPCQ_ARTIFACTS",
        "$O.HPCQ_LAYERS.>", "$JS.API.STREAM.PURGE.OBJ_HPCQ_LAYERS",
        "$JS.API.CONSUMER.CREATE.OBJ_HPCQ_LAYERS.>", "$JS.API.CONSUMER.DELETE.OBJ_HPCQ_LAYERS.*",
        "$JS.API.CONSUMER.CREATE.OBJ_HPCQ_IMAGES.>", "$JS.API.CONSUMER.DELETE.OBJ_HPCQ_IMAGES.*",
        "hpcq.results.*", "hpcq.logs.>", "hpcq.dlq.*", "hpcq.llm.chat"]},
      subscribe: {allow: ["_INBOX.>"]}
    }`,
	// The bridge reads the backlog and the worker registry, keeps its state
	// in its bucket, and lends the workers' identity to its jobs, never its
	// own.
	"bridge": `{
      publish: {allow: [
        "$JS.API.INFO", "$JS.API.STREAM.INFO.*", "$JS.API.STREAM.NAMES", "$JS.API.STREAM.MSG.GET.*", "$JS.API.DIRECT.GET.>",
        "$JS.API.CONSUMER.INFO.HPCQ_TASKS.*", "$JS.API.CONSUMER.LIST.HPCQ_TASKS",
        "$JS.API.CONSUMER.CREATE.KV_HPCQ_WORKERS.>", "$JS.API.CONSUMER.DELETE.KV_HPCQ_WORKERS.*", "$JS.FC.>",
        "$JS.API.STREAM.CREATE.KV_HPCQ_BRIDGE", "$JS.API.STREAM.UPDATE.KV_HPCQ_BRIDGE",
        "$JS.API.CONSUMER.CREATE.KV_HPCQ_BRIDGE.>", "$JS.API.CONSUMER.DELETE.KV_HPCQ_BRIDGE.*",
        "$KV.HPCQ_BRIDGE.>"]},
      subscribe: {allow: ["_INBOX.>"]}
    }`,
}

func startNATSCluster(t *testing.T, hosts []*netns.Host, auth *natsAuth) *natsCluster {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		t.Skipf("nats-server not found: %v (scripts/services.sh install nats)", err)
	}
	c := &natsCluster{hosts: hosts, auth: auth}
	scheme := "nats"
	if auth != nil {
		scheme = "tls"
	}
	var routes []string
	for _, h := range hosts {
		routes = append(routes, fmt.Sprintf("nats-route://%s:6222", h.Addr))
		c.urls = append(c.urls, fmt.Sprintf("%s://%s:4222", scheme, h.Addr))
	}
	for _, h := range hosts {
		dir := t.TempDir()
		conf := filepath.Join(dir, "nats.conf")
		var tls, users string
		if auth != nil {
			tls = fmt.Sprintf("tls { cert_file: %q, key_file: %q, ca_file: %q, timeout: 5 }", auth.ca, auth.key, auth.ca)
			var u []string
			for role, perms := range natsPermissions {
				u = append(u, fmt.Sprintf("{user: %s, password: %q, permissions: %s}", role, auth.passwords[role], perms))
			}
			users = "authorization { users = [\n" + strings.Join(u, "\n") + "\n] }"
		}
		require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(`server_name: %s
listen: %s:4222
jetstream { store_dir: %q }
%s
%s
cluster { name: hpcq, listen: %s:6222, routes: [%s]
  %s
}
`, h.Name, h.Addr, filepath.Join(dir, "js"), tls, users, h.Addr, strings.Join(routes, ", "), tls)), 0o600))
		c.confs = append(c.confs, conf)
		c.procs = append(c.procs, startOn(t, h, os.Environ(), bin, "-c", conf))
	}
	c.ready(t)
	return c
}

// connect connects the test to the cluster, as the scheduler's user.
func (c *natsCluster) connect() (*nats.Conn, error) {
	opts := []nats.Option{nats.Timeout(2 * time.Second)}
	if c.auth != nil {
		opts = append(opts, nats.RootCAs(c.auth.ca), nats.UserInfo("scheduler", c.auth.passwords["scheduler"]))
	}
	return nats.Connect(strings.Join(c.urls, ","), opts...)
}

// env is what a process of role needs to connect.
func (c *natsCluster) env(role string) []string {
	env := []string{"HPCQ_NATS_URL=" + strings.Join(c.urls, ",")}
	if c.auth != nil {
		env = append(env, "HPCQ_NATS_TLS_CA="+c.auth.ca, "HPCQ_NATS_USER="+role, "HPCQ_NATS_PASSWORD_FILE="+c.auth.files[role])
	}
	return env
}

// ready waits for the cluster's JetStream to place streams on every peer.
func (c *natsCluster) ready(t *testing.T) {
	testutil.Eventually(t, time.Minute, "the NATS cluster's JetStream", func() bool {
		nc, err := c.connect()
		if err != nil {
			return false
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		// Until every peer has joined, a 3-replica stream has "no suitable
		// peers for placement".
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "READY", Subjects: []string{"ready.probe"}, Replicas: len(c.hosts),
			Storage: jetstream.FileStorage}); err != nil {
			return false
		}
		return js.DeleteStream(ctx, "READY") == nil
	})
}

func (c *natsCluster) restart(t *testing.T, i int) {
	bin, _ := exec.LookPath("nats-server")
	c.procs = append(c.procs, startOn(t, c.hosts[i], os.Environ(), bin, "-c", c.confs[i]))
}

// dump logs the streams' and consumers' state (for a failed test).
func (c *natsCluster) dump(t *testing.T) {
	nc, err := c.connect()
	if err != nil {
		t.Logf("NATS: %v", err)
		return
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name := range js.StreamNames(ctx).Name() {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Logf("stream %s: %v", name, err)
			continue
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Logf("stream %s: %v", name, err)
			continue
		}
		t.Logf("stream %s: msgs=%d first=%d last=%d cluster=%+v", name, info.State.Msgs, info.State.FirstSeq, info.State.LastSeq, info.Cluster)
		for ci := range s.ListConsumers(ctx).Info() {
			t.Logf("  consumer %s: pending=%d ack_pending=%d redelivered=%d waiting=%d cluster=%+v", ci.Name, ci.NumPending,
				ci.NumAckPending, ci.NumRedelivered, ci.NumWaiting, ci.Cluster)
		}
	}
}

// leader is the name of the tasks stream's leader.
func (c *natsCluster) leader(t *testing.T) string {
	nc, err := c.connect()
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	var name string
	testutil.Eventually(t, 30*time.Second, "the tasks stream's leader", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, queue.TasksStream)
		if err != nil {
			return false
		}
		info, err := s.Info(ctx)
		if err != nil || info.Cluster == nil || info.Cluster.Leader == "" {
			return false
		}
		name = info.Cluster.Leader
		return true
	})
	return name
}

// serviceOn starts service (redis, clickhouse) on host h through
// scripts/services.sh, bound to the host's address, its data in dir (a
// restart keeps it and the ports); returns its env lines.
func serviceOn(t *testing.T, h *netns.Host, dir, verb, service string, env ...string) map[string]string {
	t.Helper()
	cmd := h.Command(filepath.Join(testutil.RepoRoot(t), "scripts", "services.sh"), verb, service, dir)
	cmd.Env = append(append(os.Environ(), "HPCQ_SERVICES_HOST="+h.Addr), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "services.sh %s %s on %s: %s", verb, service, h.Name, stderr.String())
	return testutil.ParseEnv(string(out))
}

// startServices starts Redis (ACL user hpcq) and ClickHouse (user hpcq)
// on h with the passwords of sec, stopped (by their pids) when the test
// ends.
func startServices(t *testing.T, h *netns.Host, sec secrets) (dirs map[string]string, env map[string]string) {
	t.Helper()
	testutil.RequireBinary(t, "redis-server", "scripts/services.sh install redis")
	testutil.RequireBinary(t, "clickhouse-server", "scripts/services.sh install clickhouse")
	dirs, env = map[string]string{}, map[string]string{}
	auth := []string{"HPCQ_REDIS_USER=hpcq", "HPCQ_REDIS_REQUIREPASS=" + sec.redis,
		"HPCQ_CLICKHOUSE_USER=hpcq", "HPCQ_CLICKHOUSE_PASSWORD=" + sec.clickhouse}
	for _, s := range []string{"redis", "clickhouse"} {
		dirs[s] = t.TempDir()
		for k, v := range serviceOn(t, h, dirs[s], "start", s, auth...) {
			env[k] = v
		}
		t.Cleanup(func() { serviceOn(t, h, dirs[s], "stop", s) })
	}
	return dirs, env
}

// secrets of the multi-host run: random, handed to hpcq's processes in
// files of mode 600.
type secrets struct {
	redis, clickhouse string
	files             []string          // HPCQ_*_FILE=path
	nats, natsFiles   map[string]string // role -> password, its file
}

func newSecrets(t *testing.T) secrets {
	t.Helper()
	random := func() string {
		b := make([]byte, 16)
		_, err := rand.Read(b)
		require.NoError(t, err)
		return hex.EncodeToString(b)
	}
	s := secrets{redis: "redis-" + random(), clickhouse: "ch-" + random()}
	dir := t.TempDir()
	for name, v := range map[string]string{"HPCQ_REDIS_PASSWORD_FILE": s.redis, "HPCQ_CLICKHOUSE_PASSWORD_FILE": s.clickhouse} {
		p := filepath.Join(dir, strings.ToLower(name))
		require.NoError(t, os.WriteFile(p, []byte(v+"\n"), 0o600))
		s.files = append(s.files, name+"="+p)
	}
	s.nats, s.natsFiles = map[string]string{}, map[string]string{}
	for role := range natsPermissions {
		s.nats[role] = "nats-" + role + "-" + random()
		s.natsFiles[role] = filepath.Join(dir, "nats-"+role)
		require.NoError(t, os.WriteFile(s.natsFiles[role], []byte(s.nats[role]), 0o600))
	}
	return s
}

// all are the secret values.
func (s secrets) all() []string {
	out := []string{s.redis, s.clickhouse}
	for _, p := range s.nats {
		out = append(out, p)
	}
	return out
}

func requireNetns(t *testing.T) {
	t.Helper()
	if why := netns.Available(); why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %s", why)
		}
		t.Skip(why)
	}
}

// TestQueueDeclaredAtOnceOnACluster: scheduler and workers start together
// against a NATS cluster of 3 and each declares the replicated streams and
// buckets: every one of them gets its queue. (NATS 2.9 leaves all but one of
// concurrent declarations of a new replicated stream unanswered; each used
// to wait out its whole deadline and exit.)
func TestQueueDeclaredAtOnceOnACluster(t *testing.T) {
	t.Parallel()
	requireNetns(t)
	nw, err := netns.New()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, nw.Close()) })
	var hosts []*netns.Host
	for _, name := range []string{"nats1", "nats2", "nats3"} {
		h, err := nw.AddHost(name)
		require.NoError(t, err)
		hosts = append(hosts, h)
	}
	cl := startNATSCluster(t, hosts, nil)
	errs := make(chan error, 3)
	for i := range 3 {
		go func() {
			nc, err := nats.Connect(cl.urls[i])
			if err != nil {
				errs <- err
				return
			}
			defer nc.Close()
			_, err = queue.New(context.Background(), nc, queue.Options{Replicas: 3}, nil)
			errs <- err
		}()
	}
	for range 3 {
		require.NoError(t, <-errs)
	}
}

// TestMultiHost: a tree search across hosts. Three NATS hosts (a cluster
// with JetStream; hpcq's streams and buckets with 3 replicas), a head host
// (the scheduler) and two compute hosts (a worker each), each a network
// namespace with its own address and hostname on a bridge of the test's
// own. While the run goes the test kills the tasks stream's leader
// (SIGKILL) and later restarts it, kills a compute host whole (every
// process in it) while its tasks run and later boots its worker again,
// cuts the other compute host off the network and heals it, and SIGKILLs
// the scheduler and resumes it. At the end every node finished exactly
// once and none was lost.
func TestMultiHost(t *testing.T) {
	t.Parallel()
	requireNetns(t)
	requireTool(t, "bash")
	nw, err := netns.New()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, nw.Close()) })
	host := func(name string) *netns.Host {
		h, err := nw.AddHost(name)
		require.NoError(t, err)
		return h
	}
	natsHosts := []*netns.Host{host("nats1"), host("nats2"), host("nats3")}
	service, head, compute1, compute2 := host("service"), host("head"), host("compute1"), host("compute2")
	sec := newSecrets(t)
	var addrs []string
	for _, h := range natsHosts {
		addrs = append(addrs, h.Addr)
	}
	auth := &natsAuth{passwords: sec.nats, files: sec.natsFiles}
	auth.ca, auth.key = testutil.SelfSignedFor(t, t.TempDir(), addrs...)
	cl := startNATSCluster(t, natsHosts, auth)
	svcDirs, svc := startServices(t, service, sec)
	sl := startSlurmHosts(t, head, compute1, compute2)
	t.Cleanup(func() {
		if t.Failed() {
			for _, f := range []string{filepath.Join(svcDirs["redis"], "redis.log"), filepath.Join(svcDirs["clickhouse"], "log", "error.log")} {
				data, _ := os.ReadFile(f)
				t.Logf("%s:\n%s", f, data)
			}
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			cl.dump(t)
		}
	})

	// The tasks log each execution where the sandbox lets them write.
	shared := filepath.Join(t.TempDir(), "shared")
	require.NoError(t, os.Mkdir(shared, 0o777))
	require.NoError(t, os.Chmod(shared, 0o777))
	execLog := filepath.Join(shared, "executions.log")
	const nodes = 28
	// The last nodes' runs wait for the gate, opened after the scheduler's
	// kill: however fast the rest goes, work is left for every fault.
	const gated = 4
	gate := filepath.Join(shared, "gate")
	var llmMu sync.Mutex
	var llmAt []time.Time // when each request arrived
	srv := fakellm.NewOn(t, nw.Gateway+":0", func(r fakellm.Request) fakellm.Reply {
		llmMu.Lock()
		llmAt = append(llmAt, time.Now())
		llmMu.Unlock()
		switch r.Kind {
		case "phase0":
			return fakellm.Reply{Content: fakellm.WithMemory("{}", fakellm.Plan("a script"))}
		case "draft":
			wait := ""
			if r.KindN > nodes-gated {
				wait = fmt.Sprintf("while [ ! -e %s ]; do sleep 0.2; done\n", gate)
			}
			return fakellm.Reply{Content: fakellm.WithMemory("{}", runScript(fmt.Sprintf(
				"%[3]secho \"$HPCQ_NODE_ID $(hostname) start $HPCQ_ATTEMPT $(date +%%T.%%N)\" >> %[1]s\nsleep 4\necho \"$HPCQ_NODE_ID $(hostname) end $HPCQ_ATTEMPT $(date +%%T.%%N)\" >> %[1]s\necho 'METRIC score=%[2]d'\n", execLog, r.KindN, wait)))}
		case "summary":
			return fakellm.Reply{Content: fakellm.WithMemory("{}", `{"summary": "a script"}`)}
		}
		return fakellm.Reply{Status: 400}
	})
	idea := writeIdea(t, nodes, 4)
	common := []string{"HPCQ_NATS_REPLICAS=3", "HPCQ_ACK_WAIT=20s", "HPCQ_SANDBOX_WRITABLE=" + shared,
		"HPCQ_REDIS_URL=" + svc["HPCQ_REDIS_URL"], "HPCQ_CLICKHOUSE_DSN=" + svc["HPCQ_CLICKHOUSE_DSN"]}
	common = append(common, sec.files...)
	var workers []*hostProc
	var spools []string
	spool := func() string {
		d := t.TempDir()
		spools = append(spools, d)
		return d
	}
	runDir := filepath.Join(t.TempDir(), "run-multihost")
	schedEnv := baseEnv(t, append(append(common, cl.env("scheduler")...), "OPENAI_BASE_URL="+srv.BaseURL(), "OPENAI_API_KEY=test-key", "HPCQ_SPOOL_DIR="+spool())...)
	sched := startOn(t, head, schedEnv, "scheduler", "run", "--run-dir", runDir, idea)
	testutil.Eventually(t, time.Minute, "the scheduler's queue", func() bool { return strings.Contains(sched.output(), "run started") })
	// A worker with a wrong password stops at once and says why.
	wrong := filepath.Join(t.TempDir(), "wrong")
	require.NoError(t, os.WriteFile(wrong, []byte("not-the-password"), 0o600))
	bad := startOn(t, compute2, baseEnv(t, append(append(common, cl.env("worker")...), "HPCQ_NATS_PASSWORD_FILE="+wrong,
		"HPCQ_WORKER_ID=bad", "HPCQ_WORK_DIR="+t.TempDir(), "HPCQ_SPOOL_DIR="+t.TempDir())...), "worker", "--pools", "cpu")
	workers = append(workers, bad)
	select {
	case <-bad.Done:
		require.Error(t, bad.Err)
		require.Contains(t, strings.ToLower(bad.output()), "authorization violation", bad.output())
		require.NotContains(t, bad.output(), "not-the-password")
	case <-time.After(30 * time.Second):
		t.Fatalf("a worker with a wrong password still runs:\n%s", bad.output())
	}
	// Workers come as Slurm jobs: the bridge on the head host submits them,
	// Slurm places one on each compute host (2 CPUs each, 2 per job). The
	// jobs share a file system with the head (log, work and spool
	// directories) and get the workers' NATS identity, not the bridge's.
	jobDir := t.TempDir()
	bridgeCfg := filepath.Join(jobDir, "bridge.yaml")
	require.NoError(t, os.WriteFile(bridgeCfg, []byte(fmt.Sprintf(`name: multihost
interval: 1s
log_dir: %s
worker_bin: %s
queues:
  cpu:
    partition: debug
    cpus_per_task: 2
    slots: 2
    max_jobs: 2
    backlog: 2
    idle_timeout: 10m
`, filepath.Join(jobDir, "logs"), filepath.Join(binDir, "worker"))), 0o644))
	bridgeEnv := baseEnv(t, append(append(common, cl.env("bridge")...), "SLURM_CONF="+sl.env["SLURM_CONF"],
		"HPCQ_WORKER_NATS_USER=worker", "HPCQ_WORKER_NATS_PASSWORD_FILE="+sec.natsFiles["worker"],
		"HPCQ_WORK_DIR="+spool(), "HPCQ_SPOOL_DIR="+spool())...)
	bridge := startOn(t, head, bridgeEnv, "slurm-bridge", "--config", bridgeCfg)
	// jobsOn are the ids of the jobs running on node, as the controller
	// sees them.
	jobsOn := func(node string) []string {
		var ids []string
		for _, l := range strings.Split(sl.cmd(t, "squeue", "-h", "-t", "RUNNING", "-o", "%i %N"), "\n") {
			if id, n, ok := strings.Cut(l, " "); ok && n == node {
				ids = append(ids, id)
			}
		}
		return ids
	}
	testutil.Eventually(t, 2*time.Minute, "a worker job on each compute host", func() bool {
		return len(jobsOn("compute1")) == 1 && len(jobsOn("compute2")) == 1
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("worker jobs' output:\n%s", jobOutputs(filepath.Join(jobDir, "logs")))
		}
	})
	done := func() int {
		m, _ := filepath.Glob(filepath.Join(runDir, "nodes", "*", "result.json"))
		return len(m)
	}
	// running: a node's run started on host and has not ended.
	running := func(host string) bool {
		data, _ := os.ReadFile(execLog)
		open := map[string]int{}
		for _, l := range strings.Split(string(data), "\n") {
			if f := strings.Fields(l); len(f) == 5 && f[1] == host {
				if f[2] == "start" {
					open[f[0]+"/"+f[3]]++
				} else {
					open[f[0]+"/"+f[3]]--
				}
			}
		}
		for _, n := range open {
			if n > 0 {
				return true
			}
		}
		return false
	}
	var faults []string
	fault := func(name string) {
		faults = append(faults, name)
		t.Logf("%s fault %s", time.Now().Format("15:04:05.000"), name)
	}
	t.Cleanup(func() {
		if t.Failed() {
			data, _ := os.ReadFile(execLog)
			t.Logf("executions:\n%s", data)
		}
	})

	// 1. The tasks stream's leader is killed, then comes back.
	testutil.Eventually(t, 3*time.Minute, "two nodes done", func() bool { return done() >= 2 })
	leader := cl.leader(t)
	li := -1
	for i, h := range natsHosts {
		if h.Name == leader {
			li = i
		}
	}
	require.GreaterOrEqual(t, li, 0, "leader %q is one of the hosts", leader)
	natsHosts[li].Kill()
	natsKilledAt := time.Now()
	fault("nats_leader_killed")
	after := done()
	testutil.Eventually(t, 3*time.Minute, "two more nodes without the old leader", func() bool { return done() >= min(after+2, nodes-gated) })
	cl.restart(t, li)
	leaderBackAt := time.Now()
	t.Logf("%s leader restarted", leaderBackAt.Format("15:04:05.000"))

	// 2. A compute host dies whole while its tasks run: its worker job,
	// slurmd and munged with it. It boots again (munged, slurmd); Slurm
	// ends the lost job and the bridge's next job lands there.
	testutil.Eventually(t, 2*time.Minute, "compute1 running a task", func() bool { return running("compute1") })
	lostJobs := jobsOn("compute1")
	compute1.Kill()
	compute1KilledAt := time.Now()
	fault("compute_host_killed")
	after = done()
	testutil.Eventually(t, 3*time.Minute, "a node done on the host that is left", func() bool { return done() > after || done() == nodes-gated })
	sl.startNode(t, compute1)
	t.Logf("%s compute1 booted", time.Now().Format("15:04:05.000"))
	// Not the lost job, which the controller may still show running for a
	// moment: a new worker, which ships what the dead one had spooled.
	testutil.Eventually(t, 3*time.Minute, "a new worker job on compute1", func() bool {
		ids := jobsOn("compute1")
		return len(ids) == 1 && !slices.Contains(lostJobs, ids[0])
	})

	// 3. The other compute host is cut off for a while, then healed.
	require.NoError(t, compute2.LinkDown())
	fault("compute_host_partitioned")
	time.Sleep(8 * time.Second) //nolint:forbidigo // the partition lasts 8 s
	require.NoError(t, compute2.LinkUp())
	t.Logf("%s healed", time.Now().Format("15:04:05.000"))

	// 4. Redis and ClickHouse are restarted (stopped, then started on the
	// same ports with the same data).
	for _, sv := range []string{"redis", "clickhouse"} {
		serviceOn(t, service, svcDirs[sv], "stop", sv)
	}
	fault("services_restarted")
	time.Sleep(3 * time.Second) //nolint:forbidigo // the services stay down 3 s
	for _, sv := range []string{"redis", "clickhouse"} {
		serviceOn(t, service, svcDirs[sv], "start", sv)
	}

	// 5. The scheduler is SIGKILLed (its process group; the head host keeps
	// slurmctld and the bridge) and resumed on the head host.
	after = done()
	testutil.Eventually(t, 3*time.Minute, "a node done after the heal", func() bool { return done() > after || done() == nodes-gated })
	require.LessOrEqual(t, done(), nodes-gated, "nodes left for the scheduler's kill")
	require.NoError(t, syscall.Kill(-sched.Cmd.Process.Pid, syscall.SIGKILL))
	<-sched.Done
	killedAt := time.Now()
	fault("scheduler_killed")
	first := sched
	sched = startOn(t, head, schedEnv, "scheduler", "run", "--resume", runDir)
	require.NoError(t, os.WriteFile(gate, nil, 0o644))

	select {
	case <-sched.Done:
		require.NoError(t, sched.Err, sched.output())
		require.Contains(t, sched.output(), "resumed=true", "the run went on from its directory")
	case <-time.After(5 * time.Minute):
		t.Fatalf("the run did not end:\n%s", sched.output())
	}

	// Every node finished exactly once: one result each, status ok.
	out, code := run(t, schedEnv, "scheduler", "query", "--run-dir", runDir, "--format", "csv",
		"SELECT count(*) AS n, sum(status = 'ok') AS ok FROM nodes FINAL WHERE run = 'run-multihost'")
	require.Equal(t, 0, code, out)
	require.Equal(t, fmt.Sprintf("n,ok\n%d,%d\n", nodes, nodes), out)
	data, err := os.ReadFile(execLog)
	require.NoError(t, err)
	// A run that a killed host interrupted either never ends, or ends
	// before its worker could store its result (a publish waiting out the
	// NATS election when the host died: no worker says its result was a
	// duplicate), or ends and stores it while the election goes on and the
	// host dies before its confirmed ack is through (the task comes back; the
	// second run's result is dropped as a duplicate). A task delivered by
	// the NATS leader as it was killed can be delivered again by the next
	// one (the delivery had not reached the followers): it runs to its end,
	// runs again after the election, and the second result is dropped as a
	// duplicate. Any other node that ends twice is a node run twice.
	ended := map[string]int{}
	endedOn := map[string][]string{}   // node -> "host time" of each end
	startedOn := map[string][]string{} // node -> time of each start
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(l)
		require.Len(t, f, 5, l)
		switch f[2] {
		case "end":
			ended[f[0]]++
			endedOn[f[0]] = append(endedOn[f[0]], f[1]+" "+f[4])
		case "start":
			startedOn[f[0]] = append(startedOn[f[0]], f[4])
		}
	}
	workerLogs := strings.Join(append(outputs(workers), jobOutputs(filepath.Join(jobDir, "logs"))), "\n")
	storedTwice := func(node string) bool {
		for _, l := range strings.Split(workerLogs, "\n") {
			if strings.Contains(l, "result already stored") && strings.Contains(l, node) {
				return true
			}
		}
		return false
	}
	lost, duplicated := nodes-done(), 0
	// Times of one day as `date +%T.%N` prints them compare as text.
	clock := func(t time.Time) string { return t.Format("15:04:05.000000000") }
	for n, c := range ended {
		if host, at, _ := strings.Cut(endedOn[n][0], " "); c == 2 && host == "compute1" && at < clock(compute1KilledAt) {
			switch {
			case !storedTwice(n):
				t.Logf("%s: its first run ended on compute1 at %s, its result was never stored, the host was killed at %s: interrupted",
					n, at, compute1KilledAt.Format("15:04:05.000"))
				continue
			case at > clock(natsKilledAt):
				t.Logf("%s: its first run ended on compute1 at %s during the NATS election (leader killed at %s), its ack was cut by the host's kill at %s; the second run's result was dropped: interrupted",
					n, at, natsKilledAt.Format("15:04:05.000"), compute1KilledAt.Format("15:04:05.000"))
				continue
			}
		}
		if starts := startedOn[n]; c == 2 && len(starts) == 2 && storedTwice(n) &&
			starts[0] > clock(natsKilledAt.Add(-time.Second)) && starts[0] < clock(leaderBackAt) {
			if _, firstEnd, _ := strings.Cut(endedOn[n][0], " "); firstEnd < starts[1] {
				t.Logf("%s: delivered at %s as the NATS leader was killed (%s), delivered again after the election at %s; the second run's result was dropped: interrupted",
					n, starts[0], natsKilledAt.Format("15:04:05.000"), starts[1])
				continue
			}
		}
		duplicated += c - 1
	}
	fmt.Printf("multihost hosts=%d nats_nodes=%d slurm_nodes=%d nodes_done=%d lost=%d duplicated=%d faults=%s\n",
		len(nw.Hosts()), len(natsHosts), len(sl.nodes), done(), lost, duplicated, strings.Join(faults, ","))
	require.Zero(t, lost)
	if duplicated > 0 {
		// Each node run twice, as the executions log and the processes saw it.
		t.Logf("%d runs of nodes ended twice", duplicated)
		for n, c := range ended {
			if c < 2 {
				continue
			}
			for _, l := range strings.Split(string(data), "\n") {
				if strings.HasPrefix(l, n+" ") {
					t.Logf("  %s", l)
				}
			}
			for _, out := range append(outputs(append(workers, first, sched, bridge)), jobOutputs(filepath.Join(jobDir, "logs"))) {
				for _, l := range strings.Split(out, "\n") {
					if strings.Contains(l, n) {
						t.Logf("    %s", l)
					}
				}
			}
		}
	}
	require.Zero(t, duplicated, "no node runs twice beyond what a kill interrupted")
	require.Len(t, ended, nodes, "every node ran to its end")
	for _, h := range sl.nodes {
		require.Contains(t, string(data), " "+h.Name+" end ", "nodes ran on %s", h.Name)
	}

	// Every node's logs came home.
	for i := 1; i <= nodes; i++ {
		log, err := os.ReadFile(filepath.Join(runDir, "nodes", fmt.Sprintf("n%04d", i), "logs", "run.log"))
		if err != nil {
			res, _ := os.ReadFile(filepath.Join(runDir, "nodes", fmt.Sprintf("n%04d", i), "result.json"))
			require.NoError(t, err, "node n%04d's run log; its result: %s", i, res)
		}
		require.Contains(t, string(log), "METRIC score=")
	}

	// What ClickHouse holds, read with clickhouse-client.
	client := func(q string) string {
		out, err := exec.Command("clickhouse-client", "--config-file", svc["HPCQ_CLICKHOUSE_CLIENT_CONFIG"], "--host", service.Addr,
			"--port", svc["HPCQ_CLICKHOUSE_TCP_PORT"], "--query", q).CombinedOutput()
		require.NoError(t, err, "%s: %s", q, out)
		return strings.TrimSpace(string(out))
	}
	const where = " WHERE run = 'run-multihost'"
	testutil.Eventually(t, time.Minute, "one ok row per node in ClickHouse", func() bool {
		return client("SELECT count(), uniqExact(node), countIf(status = 'ok') FROM nodes FINAL"+where) ==
			fmt.Sprintf("%d\t%d\t%d", nodes, nodes, nodes)
	})
	// The scores come from the workers' sinks, the nodes rows above from the
	// scheduler's: each ships on its own, once a second.
	testutil.Eventually(t, time.Minute, "one score per node in ClickHouse", func() bool {
		return client("SELECT count() FROM metrics FINAL"+where+" AND name = 'score'") == fmt.Sprint(nodes)
	})
	// No LLM call recorded twice, none lost but what the scheduler's kill
	// interrupted (an answer that arrived as it died; the fake answers at
	// once, so a call asked 2 s before the kill was recorded).
	llmMu.Lock()
	served, before := len(llmAt), 0
	for _, at := range llmAt {
		if at.Before(killedAt.Add(-2*time.Second)) || at.After(killedAt) {
			before++
		}
	}
	llmMu.Unlock()
	var calls int
	_, err = fmt.Sscan(client("SELECT count() FROM llm_calls FINAL"+where), &calls)
	require.NoError(t, err)
	require.LessOrEqual(t, calls, served, "llm_calls rows against requests the endpoint served")
	require.GreaterOrEqual(t, calls, before, "llm_calls rows against requests answered well before or after the kill")
	// Memory: each node created once, and ClickHouse's mirror of the recall
	// events holds what Redis holds, branch by branch.
	require.Equal(t, fmt.Sprintf("%d\t%d", nodes, nodes),
		client("SELECT count(), uniqExact(node_id) FROM recall_events FINAL"+where+" AND kind = 'node_created'"))
	ru, err := url.Parse(svc["HPCQ_REDIS_URL"])
	require.NoError(t, err)
	rcli := func(args ...string) string {
		cmd := exec.Command("redis-cli", append([]string{"--user", ru.User.Username(), "-h", ru.Hostname(), "-p", ru.Port()}, args...)...)
		cmd.Env = append(os.Environ(), "REDISCLI_AUTH="+sec.redis)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "redis-cli %v: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	inRedis := map[string]string{}
	const prefix = "hpcq:{run-multihost}:recall:"
	for _, key := range strings.Fields(rcli("--scan", "--pattern", prefix+"*")) {
		inRedis[strings.TrimPrefix(key, prefix)] = rcli("ZCARD", key)
	}
	require.GreaterOrEqual(t, len(inRedis), nodes, "a recall list per node's branch at least")
	testutil.Eventually(t, time.Minute, "ClickHouse's recall mirror equal to Redis", func() bool {
		inCH := map[string]string{}
		for _, l := range strings.Split(client("SELECT branch, count() FROM recall_events FINAL"+where+" GROUP BY branch"), "\n") {
			if b, n, ok := strings.Cut(l, "\t"); ok {
				inCH[b] = n
			}
		}
		if !maps.Equal(inCH, inRedis) {
			t.Logf("recall events per branch: redis %v, clickhouse %v", inRedis, inCH)
			return false
		}
		return true
	})
	t.Logf("llm calls: %d served, %d recorded; recall events in %d branches", served, calls, len(inRedis))

	// No secret in the run directory, the spools, the processes' logs or the
	// results.
	var places []string
	for _, dir := range append([]string{runDir, jobDir}, spools...) {
		require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(p)
			require.NoError(t, err)
			for _, s := range sec.all() {
				require.NotContains(t, string(data), s, "a secret in %s", p)
			}
			places = append(places, p)
			return nil
		}))
	}
	for _, out := range outputs(append(workers, first, sched, bridge)) {
		for _, s := range sec.all() {
			require.NotContains(t, out, s, "a secret in a process's log")
		}
	}
	for _, table := range []string{"runs", "nodes", "phase_runs", "metrics", "llm_calls", "artifacts", "recall_events", "archival"} {
		rows := client("SELECT * FROM " + table + where + " FORMAT TSV")
		for _, s := range sec.all() {
			require.NotContains(t, rows, s, "a secret in ClickHouse's %s", table)
		}
	}
	t.Logf("no secret in %d files, %d logs, 8 tables", len(places), len(workers)+3)

	// The documented permissions are all each role needed.
	for _, p := range cl.procs {
		for _, l := range strings.Split(p.output(), "\n") {
			require.NotContains(t, l, "Permissions Violation", "a NATS user lacks a permission its role needs")
		}
	}
}
