package bridge

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestJobEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in, out []string
		err     string
	}{
		{name: "no worker identity: the bridge's environment as it is",
			in:  []string{"PATH=/bin", "HPCQ_NATS_URL=tls://a:4222", "HPCQ_NATS_USER=bridge", "HPCQ_NATS_PASSWORD_FILE=/s/bridge"},
			out: []string{"PATH=/bin", "HPCQ_NATS_URL=tls://a:4222", "HPCQ_NATS_USER=bridge", "HPCQ_NATS_PASSWORD_FILE=/s/bridge"}},
		{name: "the workers' identity replaces the bridge's, all of it",
			in: []string{"PATH=/bin", "HPCQ_NATS_URL=tls://a:4222", "HPCQ_NATS_USER=bridge", "HPCQ_NATS_PASSWORD=secret",
				"HPCQ_NATS_TLS_CERT=/s/bridge.pem", "HPCQ_NATS_TLS_CA=/s/ca.pem",
				"HPCQ_WORKER_NATS_USER=worker", "HPCQ_WORKER_NATS_PASSWORD_FILE=/s/worker"},
			out: []string{"PATH=/bin", "HPCQ_NATS_URL=tls://a:4222", "HPCQ_NATS_TLS_CA=/s/ca.pem",
				"HPCQ_NATS_USER=worker", "HPCQ_NATS_PASSWORD_FILE=/s/worker"}},
		{name: "a value with = in it",
			in:  []string{"HPCQ_NATS_TOKEN=b", "HPCQ_WORKER_NATS_TOKEN=a=b"},
			out: []string{"HPCQ_NATS_TOKEN=a=b"}},
		{name: "a misspelt worker variable",
			in:  []string{"HPCQ_WORKER_NATS_PASWORD=x"},
			err: "HPCQ_WORKER_NATS_PASWORD: not a NATS identity variable"},
		{name: "the URL is not an identity",
			in:  []string{"HPCQ_WORKER_NATS_URL=nats://b:4222"},
			err: "HPCQ_WORKER_NATS_URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := JobEnv(tc.in)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.ErrorIs(t, err, ErrConfig)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.out, out)
		})
	}
}
