package main

import (
	"bytes"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBenchLine(t *testing.T) {
	var out, log bytes.Buffer
	require.NoError(t, run(24, 4, time.Millisecond, 1.0, &out, &log))
	require.Regexp(t, regexp.MustCompile(`^bench-search nodes=24 slots=4 async_utilization=[0-9.]+ lockstep_utilization=[0-9.]+ async_wall_s=[0-9.]+ lockstep_wall_s=[0-9.]+\n$`), out.String())
}
