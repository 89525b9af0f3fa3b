package netns

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMain: as a helper (HPCQ_NETNS_LISTEN=addr) the binary answers each
// connection with its hostname.
func TestMain(m *testing.M) {
	if addr := os.Getenv("HPCQ_NETNS_LISTEN"); addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		name, _ := os.Hostname()
		for {
			c, err := ln.Accept()
			if err != nil {
				os.Exit(1)
			}
			fmt.Fprintln(c, name)
			c.Close()
		}
	}
	os.Exit(m.Run())
}

func requireNetns(t *testing.T) {
	if why := Available(); why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %s", why)
		}
		t.Skip(why)
	}
}

// TestHosts: two hosts with their own addresses and hostnames reach each
// other and the test process over the bridge; a partition cuts a host off
// and the heal brings it back; Kill stops every process of a host; Close
// leaves no namespace or link behind.
func TestHosts(t *testing.T) {
	requireNetns(t)
	nw, err := New()
	require.NoError(t, err)
	t.Cleanup(func() { _ = nw.Close() })
	a, err := nw.AddHost("alpha")
	require.NoError(t, err)
	b, err := nw.AddHost("bravo")
	require.NoError(t, err)
	require.NotEqual(t, a.Addr, b.Addr)

	srv := a.Command(os.Args[0])
	srv.Env = append(os.Environ(), "HPCQ_NETNS_LISTEN="+a.Addr+":7000")
	_, err = a.Start(srv)
	require.NoError(t, err)
	ask := func() (string, error) {
		c, err := net.DialTimeout("tcp", a.Addr+":7000", time.Second)
		if err != nil {
			return "", err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		return bufio.NewReader(c).ReadString('\n')
	}
	require.Eventually(t, func() bool { s, err := ask(); return err == nil && s == "alpha\n" }, 10*time.Second, 50*time.Millisecond,
		"the test process reaches alpha, which has its own hostname")
	host, _ := os.Hostname()
	require.NotEqual(t, "alpha", host, "the test's own hostname is untouched")

	// bravo reaches alpha by its address (bash's /dev/tcp: no tool needed).
	out, err := b.Command("bash", "-c", "exec 3<>/dev/tcp/"+a.Addr+"/7000 && cat <&3 && hostname").CombinedOutput()
	require.NoError(t, err, string(out))
	require.Equal(t, "alpha\nbravo\n", string(out))
	// Each host knows the others by name.
	out, err = b.Command("getent", "hosts", "alpha").CombinedOutput()
	require.NoError(t, err, string(out))
	require.Equal(t, []string{a.Addr, "alpha"}, strings.Fields(string(out)))

	require.NoError(t, a.LinkDown())
	_, err = ask()
	require.Error(t, err, "partitioned")
	require.NoError(t, a.LinkUp())
	require.Eventually(t, func() bool { _, err := ask(); return err == nil }, 10*time.Second, 50*time.Millisecond, "healed")

	require.NotEmpty(t, a.Pids())
	a.Kill()
	require.Empty(t, a.Pids(), "nothing of alpha runs")
	_, err = ask()
	require.Error(t, err)

	require.NoError(t, nw.Close())
	require.NoDirExists(t, nw.dir)
	list, _ := exec.Command("ip", "netns", "list").Output()
	require.NotContains(t, string(list), nw.prefix)
	links, _ := exec.Command("ip", "-o", "link", "show").Output()
	require.False(t, strings.Contains(string(links), nw.prefix), string(links))
}

// TestBind: each host sees its own directory at a path all hosts use; the
// machine still sees what was there.
func TestBind(t *testing.T) {
	requireNetns(t)
	nw, err := New()
	require.NoError(t, err)
	t.Cleanup(func() { _ = nw.Close() })
	shared, own := t.TempDir(), [2]string{t.TempDir(), t.TempDir()}
	require.NoError(t, os.WriteFile(filepath.Join(shared, "f"), []byte("machine"), 0o644))
	for i, name := range []string{"alpha", "bravo"} {
		h, err := nw.AddHost(name)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(own[i], "f"), []byte(name), 0o644))
		h.Bind(own[i], shared)
		out, err := h.Command("sh", "-c", "cat $0/f && echo x > $0/g", shared).CombinedOutput()
		require.NoError(t, err, string(out))
		require.Equal(t, name, string(out))
		require.FileExists(t, filepath.Join(own[i], "g"), "written to the host's own directory")
	}
	data, err := os.ReadFile(filepath.Join(shared, "f"))
	require.NoError(t, err)
	require.Equal(t, "machine", string(data))
	require.NoFileExists(t, filepath.Join(shared, "g"))
}
