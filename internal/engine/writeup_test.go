package engine

import (
	"testing"

	"github.com/stretchr/testify/require"
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
