// Package netns builds a cluster of hosts on one machine for tests:
// network namespaces joined by veth pairs on a bridge of their own, each
// host with its own address and, for the processes started in it, its own
// hostname (a UTS namespace), a hosts file naming every host (and no name
// server), and the
// directories it keeps to itself (Bind). Everything it creates is named
// "hq<pid>..." after the process that created it, and removed by Close,
// or by the next Cleanup when that process died without closing. Needs
// root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and iproute2.
package netns

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Net is a bridge and the hosts on it.
type Net struct {
	prefix string // hq<pid><n>
	bridge string
	subnet string // 10.X.Y (a /24)
	// Gateway is the bridge's own address: the root namespace's (the test
	// process's) address on the cluster network.
	Gateway string
	dir     string // the hosts file every host sees as /etc/hosts
	mu      sync.Mutex
	hosts   []*Host
	closed  bool
}

// Host is one namespace on the bridge.
type Host struct {
	net  *Net
	Name string // its hostname
	NS   string // the namespace
	Addr string // its address on the bridge
	veth string // the root side of its link

	mu    sync.Mutex
	procs []*Proc
	binds [][2]string // source, target
}

// Proc is a process started in a host.
type Proc struct {
	Cmd *exec.Cmd
	// Done is closed when it has exited; Err is then its Wait error.
	Done chan struct{}
	Err  error
}

var seq struct {
	sync.Mutex
	n int
}

// Available says why this machine cannot build a Net ("" when it can).
func Available() string {
	if os.Geteuid() != 0 {
		return "network namespaces need root"
	}
	for _, tool := range []string{"ip", "unshare", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " not found"
		}
	}
	return ""
}

// New creates the bridge, its address (Gateway) and the subnet; the
// subnet is 10.<pid-derived>.<n>.0/24, so that concurrent Nets differ.
func New() (*Net, error) {
	if why := Available(); why != "" {
		return nil, errors.New("netns: " + why)
	}
	Cleanup()
	seq.Lock()
	seq.n++
	n := seq.n
	seq.Unlock()
	pid := os.Getpid()
	nw := &Net{prefix: fmt.Sprintf("hq%d%c", pid, 'a'+rune(n%26)),
		subnet: fmt.Sprintf("10.%d.%d", 100+pid%100, n%250)}
	nw.bridge = nw.prefix + "br"
	nw.Gateway = nw.subnet + ".1"
	if len(nw.bridge) > 15 {
		return nil, fmt.Errorf("netns: interface name %q too long", nw.bridge)
	}
	var err error
	if nw.dir, err = os.MkdirTemp("", nw.prefix+"-netns-"); err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	if err := nw.writeHosts(); err != nil {
		nw.Close()
		return nil, err
	}
	if err := ip("link", "add", nw.bridge, "type", "bridge"); err != nil {
		nw.Close()
		return nil, err
	}
	if err := ip("addr", "add", nw.Gateway+"/24", "dev", nw.bridge); err != nil {
		nw.Close()
		return nil, err
	}
	if err := ip("link", "set", nw.bridge, "up"); err != nil {
		nw.Close()
		return nil, err
	}
	return nw, nil
}

// AddHost creates a host named name (its hostname) with the next address.
func (nw *Net) AddHost(name string) (*Host, error) {
	nw.mu.Lock()
	i := len(nw.hosts) + 10
	h := &Host{net: nw, Name: name, NS: fmt.Sprintf("%s-%s", nw.prefix, name), Addr: fmt.Sprintf("%s.%d", nw.subnet, i),
		veth: fmt.Sprintf("%sv%d", nw.prefix, i)}
	nw.hosts = append(nw.hosts, h)
	nw.mu.Unlock()
	if err := nw.writeHosts(); err != nil {
		return nil, err
	}
	peer := h.veth + "p"
	for _, args := range [][]string{
		{"netns", "add", h.NS},
		{"link", "add", h.veth, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "netns", h.NS},
		{"link", "set", h.veth, "master", nw.bridge},
		{"link", "set", h.veth, "up"},
		{"-n", h.NS, "link", "set", "lo", "up"},
		{"-n", h.NS, "link", "set", peer, "name", "eth0"},
		{"-n", h.NS, "addr", "add", h.Addr + "/24", "dev", "eth0"},
		{"-n", h.NS, "link", "set", "eth0", "up"},
		{"-n", h.NS, "route", "add", "default", "via", nw.Gateway},
	} {
		if err := ip(args...); err != nil {
			return nil, fmt.Errorf("host %s: %w", name, err)
		}
	}
	return h, nil
}

// writeHosts writes the hosts file: every host's name and address, as a
// cluster's DNS would answer (a name no host has is looked up as the
// machine would, which in a namespace can wait out a resolver's timeouts).
// It is written in place: the processes of every host see it as it grows.
func (nw *Net) writeHosts() error {
	var b strings.Builder
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost\n")
	for _, h := range nw.Hosts() {
		fmt.Fprintf(&b, "%s\t%s\n", h.Addr, h.Name)
	}
	if err := os.WriteFile(filepath.Join(nw.dir, "hosts"), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("netns: hosts file: %w", err)
	}
	// No name server on the network: a name the hosts file lacks (or its
	// IPv6 address, which getaddrinfo asks first) fails at once instead of
	// waiting for the machine's resolver, which the hosts cannot reach.
	if err := os.WriteFile(filepath.Join(nw.dir, "resolv.conf"), []byte("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n"), 0o644); err != nil {
		return fmt.Errorf("netns: resolv.conf: %w", err)
	}
	return nil
}

// Hosts are the hosts added so far.
func (nw *Net) Hosts() []*Host {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return append([]*Host(nil), nw.hosts...)
}

// Bind gives the host a directory of its own at target: the processes
// started in it afterwards see source there (a bind mount in a private
// mount namespace), the rest of the machine still sees target. Hosts share the machine's filesystem otherwise, as
// hosts share a cluster file system; Bind is for what a real host keeps
// on its own disk at a path every host uses (a daemon's socket, pid file
// or spool named in a configuration all hosts read).
func (h *Host) Bind(source, target string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.binds = append(h.binds, [2]string{source, target})
}

// Command is a command to run in the host, with its hostname and its bound
// directories: start it with Start (so that Kill and Close know it). It
// enters the host's network namespace with nsenter, not ip netns exec,
// which would mount a sysfs of the namespace over /sys and so hide the
// machine's cgroup file systems (slurmd needs them).
func (h *Host) Command(name string, args ...string) *exec.Cmd {
	script := `hostname "$0" && exec "$@"`
	h.mu.Lock()
	binds := append([][2]string{{filepath.Join(h.net.dir, "hosts"), "/etc/hosts"}, {filepath.Join(h.net.dir, "resolv.conf"), "/etc/resolv.conf"}}, h.binds...)
	for i := len(binds) - 1; i >= 0; i-- {
		script = fmt.Sprintf("mount --bind %s %s && %s", shellQuote(binds[i][0]), shellQuote(binds[i][1]), script)
	}
	h.mu.Unlock()
	cmd := exec.Command("nsenter", append([]string{"--net=/run/netns/" + h.NS, "unshare", "--uts", "--mount", "sh", "-c", script, h.Name, name}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// Start starts cmd (from Command) and records it; the host waits for it
// (do not call cmd.Wait: wait on Done).
func (h *Host) Start(cmd *exec.Cmd) (*Proc, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Proc{Cmd: cmd, Done: make(chan struct{})}
	go func() {
		p.Err = cmd.Wait()
		close(p.Done)
	}()
	h.mu.Lock()
	h.procs = append(h.procs, p)
	h.mu.Unlock()
	return p, nil
}

// Pids are every process in the host's network namespace: those started
// here and their descendants (the only processes in it).
func (h *Host) Pids() []int {
	out, err := exec.Command("ip", "netns", "pids", h.NS).Output()
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
}

// Kill SIGKILLs every process of the host, as a machine that loses power:
// nothing in it gets to clean up. The host's network stays.
func (h *Host) Kill() {
	for range 3 { // a process forking while it is killed
		pids := h.Pids()
		if len(pids) == 0 {
			break
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
	h.mu.Lock()
	procs := h.procs
	h.procs = nil
	h.mu.Unlock()
	for _, p := range procs {
		<-p.Done
	}
}

// LinkDown cuts the host off the network (a partition); LinkUp heals it.
func (h *Host) LinkDown() error { return ip("link", "set", h.veth, "down") }

// LinkUp reconnects the host.
func (h *Host) LinkUp() error { return ip("link", "set", h.veth, "up") }

// Close kills every host's processes and removes the namespaces, links
// and bridge. It is safe to call twice.
func (nw *Net) Close() error {
	nw.mu.Lock()
	if nw.closed {
		nw.mu.Unlock()
		return nil
	}
	nw.closed = true
	hosts := nw.hosts
	nw.mu.Unlock()
	var errs []error
	for _, h := range hosts {
		h.Kill()
		if err := ip("netns", "del", h.NS); err != nil {
			errs = append(errs, err)
		}
		_ = ip("link", "del", h.veth) // gone with its peer's namespace, usually
	}
	if err := ip("link", "del", nw.bridge); err != nil {
		errs = append(errs, err)
	}
	if nw.dir != "" {
		errs = append(errs, os.RemoveAll(nw.dir))
	}
	return errors.Join(errs...)
}

var owned = regexp.MustCompile(`^hq(\d+)[a-z]`)

// Cleanup removes the namespaces and links of Nets whose process is gone
// (a test killed before it could Close), killing what still runs in them.
func Cleanup() {
	alive := func(name string) bool {
		m := owned.FindStringSubmatch(name)
		if m == nil {
			return true // not ours
		}
		pid, _ := strconv.Atoi(m[1])
		return pid == os.Getpid() || syscall.Kill(pid, 0) == nil
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || alive(f[0]) {
			continue
		}
		ns := f[0]
		h := &Host{NS: ns}
		h.Kill()
		_ = ip("netns", "del", ns)
	}
	out, _ = exec.Command("ip", "-o", "link", "show").Output()
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if owned.MatchString(name) && !alive(name) {
			_ = ip("link", "del", name)
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "hq*-netns-*"))
	for _, d := range dirs {
		if !alive(filepath.Base(d)) {
			_ = os.RemoveAll(d)
		}
	}
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func ip(args ...string) error {
	var stderr bytes.Buffer
	cmd := exec.Command("ip", args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
