// Package netns builds a cluster of hosts on one machine for tests:
// network namespaces joined by veth pairs on a bridge of their own, each
// host with its own address and, for the processes started in it, its own
// hostname (a UTS namespace). Everything it creates is named
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
	for _, tool := range []string{"ip", "unshare"} {
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
	if err := ip("link", "add", nw.bridge, "type", "bridge"); err != nil {
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

// Hosts are the hosts added so far.
func (nw *Net) Hosts() []*Host {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return append([]*Host(nil), nw.hosts...)
}

// Command is a command to run in the host, with its hostname: start it
// with Start (so that Kill and Close know it).
func (h *Host) Command(name string, args ...string) *exec.Cmd {
	script := `hostname "$0" && exec "$@"`
	cmd := exec.Command("ip", append([]string{"netns", "exec", h.NS, "unshare", "--uts", "sh", "-c", script, h.Name, name}, args...)...)
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
}

func ip(args ...string) error {
	var stderr bytes.Buffer
	cmd := exec.Command("ip", args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
