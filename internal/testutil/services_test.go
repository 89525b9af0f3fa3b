package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestServices starts each server through scripts/services.sh, talks to
// it with its own client, and stops it by its pid.
func TestServices(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		s := StartService(t, "redis")
		url := s.Env["HPCQ_REDIS_URL"]
		out, err := exec.Command("redis-cli", "-u", url, "ping").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "PONG" {
			t.Fatalf("redis-cli ping %s: %v %s", url, err, out)
		}
		s.Stop()
		Eventually(t, 10*time.Second, "redis to stop", func() bool { return ProcessGone(s.PID) })
	})
	t.Run("clickhouse", func(t *testing.T) {
		t.Parallel()
		s := StartService(t, "clickhouse")
		out, err := exec.Command("clickhouse-client", "--host", "127.0.0.1", "--port", s.Env["HPCQ_CLICKHOUSE_TCP_PORT"],
			"--query", "SELECT version()").CombinedOutput()
		if err != nil || !regexp.MustCompile(`^\d+\.\d+`).MatchString(strings.TrimSpace(string(out))) {
			t.Fatalf("clickhouse-client: %v %s", err, out)
		}
		t.Logf("clickhouse %s", strings.TrimSpace(string(out)))
		s.Stop()
		Eventually(t, 30*time.Second, "clickhouse to stop", func() bool { return ProcessGone(s.PID) })
	})
	t.Run("nats", func(t *testing.T) {
		t.Parallel()
		s := StartService(t, "nats")
		if !strings.HasPrefix(s.Env["HPCQ_NATS_URL"], "nats://127.0.0.1:") {
			t.Fatalf("nats url %q", s.Env["HPCQ_NATS_URL"])
		}
	})
	t.Run("nats at debug level", func(t *testing.T) {
		// The tests' nats-server says why it closed a client's connection.
		t.Parallel()
		n := StartNATS(t, "nats-server")
		nc, err := nats.Connect(n.URL)
		if err != nil {
			t.Fatalf("connect %s: %v", n.URL, err)
		}
		nc.Close()
		Eventually(t, 10*time.Second, "the closed connection logged with its reason", func() bool {
			data, err := os.ReadFile(filepath.Join(n.Dir, "nats.log"))
			return err == nil && strings.Contains(string(data), "Client connection closed: Client Closed")
		})
	})
}
