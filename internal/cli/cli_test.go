package cli

import (
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func newFlags(out *strings.Builder) (*flag.FlagSet, *string, *bool) {
	fs := flag.NewFlagSet("scheduler logs", flag.ContinueOnError)
	fs.SetOutput(out)
	phase := fs.String("phase", "", "the phase")
	follow := fs.Bool("follow", false, "follow")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: scheduler logs [flags] NODE\n\nFlags:\n")
		fs.PrintDefaults()
	}
	return fs, phase, follow
}

// TestParseFlagsAnywhere: flags after the arguments are flags (as git and
// kubectl read them); "--" ends them; the arguments keep their order.
func TestParseFlagsAnywhere(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	fs, phase, follow := newFlags(&out)
	require.NoError(t, Parse(fs, []string{"--run-dir=x", "n0001", "--phase", "compile", "-follow"}[1:]))
	require.Equal(t, "compile", *phase)
	require.True(t, *follow)
	require.Equal(t, []string{"n0001"}, fs.Args())

	fs, phase, _ = newFlags(&out)
	require.NoError(t, Parse(fs, []string{"a", "--phase=run", "b", "--", "--phase", "c"}))
	require.Equal(t, "run", *phase)
	require.Equal(t, []string{"a", "b", "--phase", "c"}, fs.Args())
	require.Empty(t, out.String())
}

// TestParseErrors: -h prints the usage once (status 0); a bad flag is one
// line and a hint (status 2), as is a stray argument (BadArgs).
func TestParseErrors(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	fs, _, _ := newFlags(&out)
	require.Equal(t, ExitError(0), Parse(fs, []string{"n1", "-h"}))
	require.Equal(t, 1, strings.Count(out.String(), "usage: scheduler logs"))
	require.Contains(t, out.String(), "-phase string")

	out.Reset()
	fs, _, _ = newFlags(&out)
	require.Equal(t, ExitError(2), Parse(fs, []string{"n1", "--bogus"}))
	require.Equal(t, "flag provided but not defined: -bogus\nrun 'scheduler logs -h' for its usage\n", out.String())

	out.Reset()
	fs, _, _ = newFlags(&out)
	require.NoError(t, Parse(fs, []string{"a", "b"}))
	require.Equal(t, ExitError(2), BadArgs(fs, `wrong arguments ["a" "b"]`))
	require.Equal(t, "scheduler logs: wrong arguments [\"a\" \"b\"]\nusage: scheduler logs [flags] NODE (-h for the flags)\n", out.String())
}
