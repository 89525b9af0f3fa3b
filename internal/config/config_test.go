package config

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestEnvThenFlags(t *testing.T) {
	t.Setenv("HPCQ_NATS_URL", "nats://env:4222")
	t.Setenv("HPCQ_ACK_WAIT", "30s")
	t.Setenv("HPCQ_POOLS", "cpu,gpu")
	t.Setenv("HPCQ_NATS_PASSWORD", "pw")
	var cfg Worker
	require.NoError(t, Load(&cfg))
	require.Equal(t, "nats://env:4222", cfg.NATS.URL)
	require.Equal(t, 30*time.Second, cfg.Queue.AckWait)
	require.Equal(t, 5, cfg.Queue.MaxDeliver, "default")
	require.Equal(t, []string{"cpu", "gpu"}, cfg.Pools)
	require.Equal(t, "pw", cfg.Conn("w").Password)

	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	AddCommonFlags(fs, &cfg.Common)
	fs.Var(ListFlag{P: &cfg.Pools}, "pools", "")
	require.NoError(t, fs.Parse([]string{"--nats-url", "nats://flag:4222", "--pools", "gpu, ,big"}))
	require.Equal(t, "nats://flag:4222", cfg.NATS.URL, "a flag overrides the environment")
	require.Equal(t, 30*time.Second, cfg.Queue.AckWait, "an unset flag keeps the environment's value")
	require.Equal(t, []string{"gpu", "big"}, cfg.Pools)
	require.Equal(t, 30*time.Second, cfg.Queue.Options().AckWait)
}

func TestBadEnvIsAnError(t *testing.T) {
	t.Setenv("HPCQ_ACK_WAIT", "soon")
	var cfg Worker
	err := Load(&cfg)
	require.ErrorContains(t, err, "ACK_WAIT")
}

func TestLogger(t *testing.T) {
	var b bytes.Buffer
	l, err := Log{Level: "warn", Format: "json"}.Logger(&b)
	require.NoError(t, err)
	l.Info("hidden")
	l.Warn("shown", "k", 1)
	require.Contains(t, b.String(), `"msg":"shown"`)
	require.NotContains(t, b.String(), "hidden")
	_, err = Log{Level: "loud"}.Logger(&b)
	require.Error(t, err)
	_, err = Log{Level: "info", Format: "xml"}.Logger(&b)
	require.ErrorContains(t, err, "text or json")
}

func TestRedactURL(t *testing.T) {
	require.Equal(t, "nats://h1:4222,nats://h2:4222", RedactURL("nats://u:pw@h1:4222, nats://tok@h2:4222"))
	require.Equal(t, "nats://h:4222", RedactURL("nats://h:4222"))
	require.Equal(t, "", RedactURL(""))
}

// TestNoUnprefixedFallback: envconfig falls back to the name without the
// prefix when the prefixed one is unset; no setting may take a variable
// every shell has (SHELL=/bin/bash once became the task shell this way).
func TestNoUnprefixedFallback(t *testing.T) {
	for _, kv := range [][2]string{{"SHELL", "/bin/bash"}, {"USER", "someone"}, {"HOME", "/home/someone"}, {"PATH", "/usr/bin"},
		{"TMPDIR", "/scratch"}, {"HOSTNAME", "node7"}, {"LANG", "C"}, {"PWD", "/work"}, {"TERM", "xterm"}} {
		t.Setenv(kv[0], kv[1])
	}
	var w Worker
	require.NoError(t, Load(&w))
	require.Equal(t, "plain", w.Shell)
	require.Equal(t, "nobody", w.Isolation.User)
	require.Empty(t, w.NATS.User)
	require.Equal(t, "hpcq-work", w.WorkDir)
	var s Scheduler
	require.NoError(t, Load(&s))
	require.Equal(t, "plain", s.Shell)
	require.Equal(t, "runs", s.RunsDir)
}

// TestSecretFiles: a secret comes from a file only its owner can read; the
// ClickHouse password joins the DSN from the environment or a flag.
func TestSecretFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), mode))
		require.NoError(t, os.Chmod(p, mode))
		return p
	}
	t.Setenv("HPCQ_REDIS_PASSWORD_FILE", write("redis", "r-secret\n", 0o600))
	t.Setenv("HPCQ_CLICKHOUSE_PASSWORD_FILE", write("ch", "c/secret@", 0o400))
	t.Setenv("HPCQ_NATS_PASSWORD_FILE", write("nats", "n-secret", 0o600))
	t.Setenv("HPCQ_CLICKHOUSE_DSN", "clickhouse://hpcq@10.0.0.1:9000/default")
	var cfg Scheduler
	require.NoError(t, Load(&cfg))
	require.Equal(t, "r-secret", cfg.Store.RedisPassword, "the trailing newline dropped")
	require.Equal(t, "n-secret", cfg.Conn("s").Password)
	require.Equal(t, "clickhouse://hpcq:c%2Fsecret%40@10.0.0.1:9000/default", cfg.Store.ClickHouseDSN)
	require.Equal(t, "clickhouse://10.0.0.1:9000/default", RedactURL(cfg.Store.ClickHouseDSN))
	require.Subset(t, cfg.Secrets(), []string{"r-secret", "n-secret", "c/secret@"})

	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	AddCommonFlags(fs, &cfg.Common)
	require.NoError(t, fs.Parse([]string{"--clickhouse-dsn", "clickhouse://10.0.0.2:9000/db"}))
	require.Equal(t, "clickhouse://default:c%2Fsecret%40@10.0.0.2:9000/db", cfg.Store.ClickHouseDSN, "a flag's DSN gets the password too")
	require.Error(t, fs.Parse([]string{"--clickhouse-dsn", "clickhouse://u:p@10.0.0.2:9000/db"}), "two passwords")

	t.Setenv("HPCQ_REDIS_PASSWORD_FILE", write("open", "x", 0o644))
	require.ErrorContains(t, Load(&Scheduler{}), "mode 0644: other users may read it; chmod 600")
	t.Setenv("HPCQ_REDIS_PASSWORD_FILE", write("empty", "\n", 0o600))
	require.ErrorContains(t, Load(&Scheduler{}), "is empty")
	t.Setenv("HPCQ_REDIS_PASSWORD_FILE", filepath.Join(dir, "missing"))
	require.ErrorContains(t, Load(&Worker{}), "HPCQ_REDIS_PASSWORD_FILE")
	t.Setenv("HPCQ_REDIS_PASSWORD_FILE", write("redis", "r-secret\n", 0o600))
	t.Setenv("HPCQ_REDIS_PASSWORD", "also")
	require.ErrorContains(t, Load(&Worker{}), "HPCQ_REDIS_PASSWORD and HPCQ_REDIS_PASSWORD_FILE are both set")
}

// TestHelp: a flag's help names the variable from the setting's own tag,
// nested and embedded settings included (a struct and its first field share
// an address), and says the setting's desc when the flag has no words.
func TestHelp(t *testing.T) {
	var w Worker
	require.Equal(t, "the server (env HPCQ_NATS_URL)", Help(&w, &w.NATS.URL, "the server"))
	require.Equal(t, "tasks at once (env HPCQ_SLOTS)", Help(&w, &w.Slots, "tasks at once"))
	require.Equal(t, "pools to pull tasks from (env HPCQ_POOLS)", Help(&w, &w.Pools, ""))
	require.Equal(t, "x (env HPCQ_SANDBOX_UIDS)", Help(&w, &w.Isolation.UIDs, "x"))
	other := 0
	require.Panics(t, func() { Help(&w, &other, "not a setting") })
}
