package writeup

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

func TestFigureName(t *testing.T) {
	for in, want := range map[string]string{
		"scaling.svg":              "scaling.svg",
		"plots/GFLOPs by N.v2.PNG": "GFLOPs-by-N-v2.png",
		"a/b/ç.pdf":                "--.pdf",
	} {
		require.Equal(t, want, figureName(in), in)
	}
	require.True(t, isContent([]byte(`<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"/>`), "svg"))
	require.False(t, isContent([]byte("#!/bin/sh"), "svg"))
	require.True(t, isContent([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), "image/png"))
	require.False(t, isContent([]byte("<html>"), "image/png"), "a plot whose content is not what its name says")
	require.True(t, isContent([]byte("%PDF-1.5\n"), "application/pdf"))
}

func TestSetup(t *testing.T) {
	dir := t.TempDir()
	for id, r := range map[string]*schema.NodeResult{
		"n0001": {Worker: "w1", Host: "h1", Toolchain: map[string]string{"gcc": "12.2.0", "mpi": "Open MPI 4.1.4"}},
		"n0002": {Worker: "w1", Host: "h1", Toolchain: map[string]string{"nvcc": "13.0"}},
		"n0003": nil, // not finished
	} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, rundir.NodesDir, id), 0o755))
		if r != nil {
			require.NoError(t, rundir.WriteJSON(rundir.Dir(dir).Path(rundir.NodeFile(id, rundir.ResultFile)), rundir.Outcome{Result: r}))
		}
	}
	require.Equal(t, "- worker w1 on host h1: gcc 12.2.0, mpi Open MPI 4.1.4, nvcc 13.0\n", Setup(dir))
	require.Empty(t, Setup(t.TempDir()))
}
