package rundir_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/rundir"
)

func TestInfoRoundTrip(t *testing.T) {
	t.Parallel()
	d := rundir.Dir(filepath.Join(t.TempDir(), "20261123-010203-abcdef"))
	require.NoError(t, os.MkdirAll(string(d), 0o755))
	_, err := d.ReadInfo()
	require.ErrorIs(t, err, rundir.ErrNoRun)
	require.ErrorContains(t, err, "has no run.json")

	in := rundir.Info{RunID: d.ID(), Command: "run", Mode: "local", NATSURL: "embedded", Results: map[string]string{"store": "sqlite"},
		Started: time.Date(2026, 11, 23, 1, 2, 3, 0, time.UTC), LocalWorkers: 1}
	require.NoError(t, d.WriteInfo(in))
	out, err := d.ReadInfo()
	require.NoError(t, err)
	require.Equal(t, in, out)
	require.Equal(t, "20261123-010203-abcdef", d.ID())
	require.Equal(t, filepath.Join(string(d), "memory", "memory.sqlite"), d.Path(rundir.MemoryDB))

	require.NoError(t, os.WriteFile(d.Path(rundir.InfoFile), []byte("{"), 0o644))
	_, err = d.ReadInfo()
	require.ErrorContains(t, err, "run.json")
}
