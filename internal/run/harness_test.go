package run

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/schema"
)

// TestHarnessSpec: run.yaml's evaluation.harness, its directory resolved
// against the idea's (eval/ by default), its files as a task carries them;
// a link in it, an empty one, one over its bound, or settings a task would
// refuse are errors that say so.
func TestHarnessSpec(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) (Spec, error) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, SpecFile), []byte("idea: x\nmetric: {name: gflops}\n"+body), 0o644))
		return LoadIdeaDir(dir)
	}
	eval := filepath.Join(dir, "eval")
	require.NoError(t, os.MkdirAll(filepath.Join(eval, "ref"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(eval, "driver.sh"), []byte("#!/bin/sh\n"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(eval, "ref", "jacobi.c"), []byte("int main(){}\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(eval, "ref", "grid.bin"), []byte{0, 1, 0xff}, 0o644))

	s, err := write("evaluation:\n  harness:\n    commands: [./driver.sh]\n    inputs: [N=1000, N=1531]\n    quick: [N=8]\n    repeats: 5\n")
	require.NoError(t, err)
	h := s.Evaluation.Harness
	require.Equal(t, eval, h.Dir, "eval/ beside run.yaml by default, absolute")
	ev, err := h.SearchTask()
	require.NoError(t, err)
	require.Equal(t, schema.EvalSearch, ev.Stage)
	require.Equal(t, []string{"N=1000", "N=1531"}, ev.Inputs)
	require.Equal(t, 5, ev.Repeats)
	require.Equal(t, []string{"N=8"}, ev.Quick)
	unset, err := write("evaluation:\n  harness:\n    commands: [./driver.sh]\n    inputs: [N=1000]\n")
	require.NoError(t, err)
	require.Equal(t, DefaultRepeats, unset.Evaluation.Harness.task(schema.EvalSearch, []string{"N=1000"}, nil).Repeats, "unset: 5")
	theirs, err := write("evaluation:\n  harness:\n    commands: [./driver.sh]\n    inputs: [N=1000]\n    repeats: 0\n")
	require.NoError(t, err)
	require.Zero(t, theirs.Evaluation.Harness.task(schema.EvalSearch, []string{"N=1000"}, nil).Repeats, "0: the harness's choice")
	byPath := map[string]schema.File{}
	for _, f := range ev.Files {
		byPath[f.Path] = f
	}
	require.Len(t, byPath, 3)
	require.Equal(t, schema.FileMode("0755"), byPath["driver.sh"].Mode)
	require.Equal(t, "int main(){}\n", byPath["ref/jacobi.c"].Content)
	require.Equal(t, schema.EncodingBase64, byPath["ref/grid.bin"].Encoding)
	require.Equal(t, base64.StdEncoding.EncodeToString([]byte{0, 1, 0xff}), byPath["ref/grid.bin"].Content)
	require.NoError(t, schema.CheckFiles(ev.Files, schema.WorkspaceLimits{}))

	_, err = write("evaluation:\n  harness:\n    commands: [./driver.sh]\n")
	require.ErrorContains(t, err, "evaluation.harness: ")
	require.ErrorContains(t, err, "evaluate.inputs")
	_, err = write("evaluation:\n  harness:\n    inputs: [N=1]\n")
	require.ErrorContains(t, err, "evaluate.commands")

	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(eval, "passwd")))
	_, err = h.SearchTask()
	require.ErrorContains(t, err, "passwd is not a regular file")
	require.NoError(t, os.Remove(filepath.Join(eval, "passwd")))
	require.NoError(t, os.WriteFile(filepath.Join(eval, "big"), []byte(strings.Repeat("x", MaxHarnessBytes)), 0o644))
	_, err = h.SearchTask()
	require.ErrorContains(t, err, "bytes in all")
	_, err = (&Harness{Dir: t.TempDir(), Commands: []string{"x"}, Inputs: []string{"a"}}).SearchTask()
	require.ErrorContains(t, err, "no file")
	_, err = (&Harness{Dir: filepath.Join(dir, "missing"), Commands: []string{"x"}, Inputs: []string{"a"}}).SearchTask()
	require.ErrorContains(t, err, "evaluation.harness.dir")
}

// TestHeldOutSpec: evaluation.harness.held_out and its gate's settings,
// defaults filled; a held-out input the search also measures, or settings
// out of range, are errors that say so; the held-out task carries the
// held-out inputs only, without a quick pass.
func TestHeldOutSpec(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) (Spec, error) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, SpecFile), []byte("idea: x\nmetric: {name: gflops}\n"+
			"evaluation:\n  harness:\n    commands: [./driver.sh]\n    inputs: [N=1024]\n    quick: [N=64]\n"+body), 0o644))
		return LoadIdeaDir(dir)
	}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "eval"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "eval", "driver.sh"), []byte("#!/bin/sh\n"), 0o755))

	s, err := write("")
	require.NoError(t, err)
	require.Equal(t, Gate{Top: DefaultGateTop, OverfitShare: DefaultOverfitShare}, s.Evaluation.Harness.Gate)
	_, err = s.Evaluation.Harness.HeldOutTask()
	require.ErrorContains(t, err, "held_out: none")

	s, err = write("    held_out: [N=1000, N=1531]\n    gate: {top: 2, overfit_share: 0.1}\n")
	require.NoError(t, err)
	h := s.Evaluation.Harness
	require.Equal(t, Gate{Top: 2, OverfitShare: 0.1}, h.Gate)
	ev, err := h.HeldOutTask()
	require.NoError(t, err)
	require.Equal(t, schema.EvalHeldOut, ev.Stage)
	require.Equal(t, []string{"N=1000", "N=1531"}, ev.Inputs)
	require.Empty(t, ev.Quick)
	search, err := h.SearchTask()
	require.NoError(t, err)
	require.NotContains(t, search.Inputs, "N=1000", "the search's tasks never carry a held-out input")

	for body, want := range map[string]string{
		"    held_out: [N=1024]\n":                   `"N=1024" is also an input of the search`,
		"    held_out: [N=64]\n":                     `"N=64" is also an input of the search`,
		"    held_out: [\"N=1\\n2\"]\n":              "evaluation.harness.held_out",
		"    held_out: [N=1]\n    gate: {top: 50}\n": "gate.top: 50",
		"    gate: {overfit_share: 1.5}\n":           "gate.overfit_share: 1.5",
	} {
		_, err := write(body)
		require.ErrorContains(t, err, want, body)
	}
}
