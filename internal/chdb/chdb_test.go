package chdb_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/chdb"
	"github.com/hpcq/hpcq/internal/testutil"
)

// TestOpenCreatesTheDatabase: a DSN naming a database the server does not
// have yet gets it; the migrations then create hpcq's tables in it. A name
// that could not be quoted safely is refused.
func TestOpenCreatesTheDatabase(t *testing.T) {
	testutil.RequireBinary(t, "clickhouse-server", "scripts/services.sh install clickhouse")
	ctx := context.Background()
	dsn := testutil.StartService(t, "clickhouse").Env["HPCQ_CLICKHOUSE_DSN"]
	fresh := strings.TrimSuffix(dsn, "/default") + "/hpcq_fresh"
	conn, err := chdb.Open(ctx, fresh)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, chdb.Migrate(ctx, conn))
	var n uint64
	require.NoError(t, conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = 'hpcq_fresh' AND name = 'nodes'").Scan(&n))
	require.EqualValues(t, 1, n)

	_, err = chdb.Open(ctx, strings.TrimSuffix(dsn, "/default")+"/bad-name")
	require.ErrorContains(t, err, `database "bad-name": only letters, digits and '_'`)
}

// TestMigrateTogether: processes that start together migrate the same
// database at once, and all succeed (an ADD COLUMN one of them made first
// counts as done); run again, nothing changes.
func TestMigrateTogether(t *testing.T) {
	testutil.RequireBinary(t, "clickhouse-server", "scripts/services.sh install clickhouse")
	ctx := context.Background()
	dsn := strings.TrimSuffix(testutil.StartService(t, "clickhouse").Env["HPCQ_CLICKHOUSE_DSN"], "/default") + "/hpcq_together"
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			conn, err := chdb.Open(ctx, dsn)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close()
			errs <- chdb.Migrate(ctx, conn)
		}()
	}
	for range 4 {
		require.NoError(t, <-errs)
	}
	conn, err := chdb.Open(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, chdb.Migrate(ctx, conn))
	var n uint64
	require.NoError(t, conn.QueryRow(ctx, "SELECT count() FROM system.columns WHERE database = 'hpcq_together' AND table = 'llm_calls' AND name IN ('reasoning_tokens', 'cached_tokens', 'tokens_estimated')").Scan(&n))
	require.EqualValues(t, 3, n)
}
