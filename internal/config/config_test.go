package config

import (
	"bytes"
	"flag"
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
