package memory

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// requireCallAsMarshal: c's line is json.Marshal's bytes for it.
func requireCallAsMarshal(t *testing.T, c call) {
	t.Helper()
	want, err := json.Marshal(&c)
	require.NoError(t, err)
	require.Equal(t, "kept"+string(want), string(c.appendJSON([]byte("kept"))))
}

// TestCallRecordAsMarshal: a memory_calls.jsonl line, written without
// reflection, is json.Marshal's: empty fields left out as the tags say,
// durations in decimal and in exponent notation, a time zone; a call
// json.Marshal refuses is logged as a line that says so.
func TestCallRecordAsMarshal(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 20, 1, 2, 345678000, time.UTC)
	requireCallAsMarshal(t, call{TS: at, Branch: "n0001", Op: "render", InBytes: 12, OutBytes: 9000, Input: "phase0 <hint> \"q\"",
		Output: "## Core memory\n\t\xff \u2028 …[cut]", Items: 4, DurationMS: 0.125, Error: "memory: failed & gone"})
	requireCallAsMarshal(t, call{})
	for _, d := range []float64{1, 1234.5, 1e-6, 1e20, 1e-7, 1e21, -3} {
		requireCallAsMarshal(t, call{TS: at.In(time.FixedZone("x", 2*3600)), Op: "fork", DurationMS: d})
	}
	for _, c := range []call{{TS: at, Op: "x", DurationMS: math.NaN()}, {TS: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), Op: "x"}} {
		line := c.appendJSON(nil)
		var got call
		require.NoError(t, json.Unmarshal(line, &got), "%s", line)
		require.Equal(t, "x", got.Op)
		require.Contains(t, got.Error, "the call log could not write this call")
	}
}

func FuzzCallRecordAsMarshal(f *testing.F) {
	f.Add(int64(1764014400123456000), "n1", "render", "in", "out <&>", "", 3, 0.5)
	f.Add(int64(0), "", "", "\xff", "\u2029\n", "e", 0, 1e-9)
	f.Fuzz(func(t *testing.T, unixNano int64, branch, op, in, out, errText string, items int, ms float64) {
		if math.IsNaN(ms) || math.IsInf(ms, 0) {
			return // refused by json.Marshal: TestCallRecordAsMarshal
		}
		requireCallAsMarshal(t, call{TS: time.Unix(0, unixNano).UTC(), Branch: branch, Op: op, InBytes: len(in), OutBytes: len(out),
			Input: in, Output: out, Items: items, DurationMS: ms, Error: errText})
	})
}
