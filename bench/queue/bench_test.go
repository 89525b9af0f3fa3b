package main

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"
)

// TestBenchSmall runs every part of the benchmark at a small size and
// checks that it prints exactly the fixed lines.
func TestBenchSmall(t *testing.T) {
	var out, log bytes.Buffer
	err := run(params{N: 500, SpawnN: 20, SpawnHomeN: 5, ContainerN: 5, Rate: 200, LatencyFor: 500 * time.Millisecond, Reps: 1}, &out, &log)
	if err != nil {
		t.Fatal(err, log.String())
	}
	want := []string{
		`^bench-queue enqueue n=500 tasks_per_s=[0-9.]+$`,
		`^bench-queue drain n=500 c=2 tasks_per_s=[0-9.]+$`,
		`^bench-queue drain n=500 c=64 tasks_per_s=[0-9.]+$`,
		`^bench-queue latency rate=200 p50_ms=[0-9.]+ p95_ms=[0-9.]+ p99_ms=[0-9.]+ max_ms=[0-9.]+$`,
		`^bench-queue spawn n=5 hpcq_s=[0-9.]+ plain_s=[0-9.]+ ratio=[0-9.]+$`,
		`^bench-queue spawn_empty_home n=20 hpcq_s=[0-9.]+ plain_s=[0-9.]+ ratio=[0-9.]+$`,
	}
	if _, err := exec.LookPath("busybox"); err == nil && os.Geteuid() == 0 {
		for _, kind := range []string{"dir", "sqfs", "sif", "oci"} {
			want = append(want, `^bench-queue container image=`+kind+` n=5 hpcq_s=[0-9.]+ plain_s=[0-9.]+ ratio=[0-9.]+$`)
		}
	} else {
		t.Log("no container lines: busybox-static or root missing")
	}
	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, re := range want {
		if !regexp.MustCompile(re).Match(lines[i]) {
			t.Errorf("line %d %q does not match %s", i+1, lines[i], re)
		}
	}
	t.Log("\n" + out.String() + log.String())
}
