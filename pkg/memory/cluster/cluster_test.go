package cluster_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/memory/cluster"
	"github.com/hpcq/hpcq/pkg/memory/memorytest"
)

// servers starts a real redis-server and clickhouse-server (scripts/services.sh)
// for the test and its subtests.
func servers(t *testing.T) (redisURL, chDSN string) {
	t.Helper()
	r := testutil.StartService(t, "redis")
	c := testutil.StartService(t, "clickhouse")
	return r.Env["HPCQ_REDIS_URL"], c.Env["HPCQ_CLICKHOUSE_DSN"]
}

var runs atomic.Int64

// open opens a store on a fresh run id: runs never see each other.
func open(t *testing.T, redisURL, chDSN string, o cluster.Options) *cluster.Store {
	t.Helper()
	if o.Run == "" {
		o.Run = fmt.Sprintf("test-%d", runs.Add(1))
	}
	o.RedisURL, o.ClickHouseDSN = redisURL, chDSN
	if o.SpoolDir == "" {
		o.SpoolDir = t.TempDir()
	}
	s, err := cluster.Open(context.Background(), o)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	redisURL, chDSN := servers(t)
	memorytest.Exercise(t, func(t *testing.T, clock *memorytest.Clock) memory.Store {
		return open(t, redisURL, chDSN, cluster.Options{Now: clock.Now})
	})
}
