package term_test

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/term"
	"github.com/hpcq/hpcq/internal/testutil"
)

// TestLogsGoAboveTheLine: on a 40-column terminal, a log record written
// while the status line shows clears it, takes rows of its own, and the
// line comes back under it, cut to the width.
func TestLogsGoAboveTheLine(t *testing.T) {
	master, slave := testutil.Pty(t, 40, 10)
	s := term.New(slave)
	log := s.Writer(slave)
	s.Status("[10:00:00] stage 1 | 1 done/2 running/0 buggy | best 5.2 GFLOP/s")
	_, err := io.WriteString(log, "time=10:00:01 level=INFO msg=\"node finished\"\n")
	require.NoError(t, err)
	s.Status("[10:00:02] stage 1 | 2 done")
	s.Done("[10:00:03] stage 1 | 3 done")
	_, err = io.WriteString(slave, "summary\n")
	require.NoError(t, err)
	slave.Close()
	var out bytes.Buffer
	_, _ = io.Copy(&out, master) // ends with EIO once the slave is closed
	rows := testutil.Screen(out.Bytes(), 40)
	require.Equal(t, []string{`time=10:00:01 level=INFO msg="node finis`, `hed"`, "[10:00:03] stage 1 | 3 done", "summary"}, rows)
}

func TestFit(t *testing.T) {
	require.Equal(t, "abc", term.Fit("abc", 3))
	require.Equal(t, "ab…", term.Fit("abcd", 3))
	require.Equal(t, "…", term.Fit("abcd", 0))
	require.Equal(t, strings.Repeat("é", 4)+"…", term.Fit(strings.Repeat("é", 9), 5))
}

func TestIsTerminal(t *testing.T) {
	_, slave := testutil.Pty(t, 80, 24)
	require.True(t, term.IsTerminal(slave))
	f, err := os.CreateTemp(t.TempDir(), "x")
	require.NoError(t, err)
	defer f.Close()
	require.False(t, term.IsTerminal(f))
}
