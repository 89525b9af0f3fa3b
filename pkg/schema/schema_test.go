package schema

import (
	"encoding/json"
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func validTask() *NodeTask {
	return &NodeTask{
		V: 1, RunID: "run-1", NodeID: "n1", Attempt: 1, Pool: "cpu",
		Artifacts: Artifacts{Run: RunPhase{Commands: []string{"true"}}},
	}
}

func TestDecodeTaskRoundTrip(t *testing.T) {
	t.Parallel()
	in := validTask()
	in.Kind = KindDraft
	in.Stage = 2
	in.Env = map[string]string{"FOO": "bar"}
	in.Artifacts.Coding.Workspace.Files = []File{{Path: "a.c", Content: "int main(){}", Mode: "0644"}}
	data, err := json.Marshal(in)
	require.NoError(t, err)
	out, err := DecodeTask(data)
	require.NoError(t, err)
	require.Equal(t, in, out)
	require.Equal(t, "run-1/n1/1", out.MsgID())
}

func TestDecodeTaskRejects(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, json, want string
		version          bool
	}{
		{"not json", `{"v":1,`, "not a JSON object", false},
		{"array", `[1,2]`, "not a JSON object", false},
		{"no version", `{"run_id":"r"}`, "v: is required", false},
		{"string version", `{"v":"1"}`, `v: "1" is not an integer`, false},
		{"unknown version", `{"v":2,"whatever":true}`, "unknown version: v: 2", true},
		{"unknown field", `{"v":1,"run_id":"r","node_id":"n","attempt":1,"pool":"cpu","artifacts":{"run":{"commands":["x"]}},"bogus":1}`, `unknown field "bogus"`, false},
		{"unknown nested field", `{"v":1,"run_id":"r","node_id":"n","attempt":1,"pool":"cpu","artifacts":{"run":{"commands":["x"],"bogus":1}}}`, `unknown field "bogus" in /artifacts/run`, false},
		{"name in another case", `{"v":1,"RUN_ID":"r","node_id":"n","attempt":1,"pool":"cpu","artifacts":{"run":{"commands":["x"]}}}`, `unknown field "RUN_ID"`, false},
		{"duplicate field", `{"v":1,"run_id":"r","run_id":"s","node_id":"n","attempt":1,"pool":"cpu","artifacts":{"run":{"commands":["x"]}}}`, `duplicate object member name "run_id"`, false},
		{"invalid UTF-8", "{\"v\":1,\"run_id\":\"r\",\"node_id\":\"n\",\"attempt\":1,\"pool\":\"cpu\",\"artifacts\":{\"run\":{\"commands\":[\"x\xff\"]}}}", "invalid UTF-8", false},
		{"missing run", `{"v":1,"node_id":"n","attempt":1,"pool":"cpu","artifacts":{"run":{"commands":["x"]}}}`, "run_id: is required", false},
		{"missing node", `{"v":1,"run_id":"r","attempt":1,"pool":"cpu","artifacts":{"run":{"commands":["x"]}}}`, "node_id: is required", false},
		{"attempt 0", `{"v":1,"run_id":"r","node_id":"n","pool":"cpu","artifacts":{"run":{"commands":["x"]}}}`, "attempt: 0", false},
		{"missing pool", `{"v":1,"run_id":"r","node_id":"n","attempt":1,"artifacts":{"run":{"commands":["x"]}}}`, "pool: is required", false},
		{"bad pool", `{"v":1,"run_id":"r","node_id":"n","attempt":1,"pool":"a.>","artifacts":{"run":{"commands":["x"]}}}`, "pool: \"a.>\"", false},
		{"dotdot node", `{"v":1,"run_id":"r","node_id":"a..b","attempt":1,"pool":"cpu","artifacts":{"run":{"commands":["x"]}}}`, "node_id", false},
		{"slash node", `{"v":1,"run_id":"r","node_id":"a/b","attempt":1,"pool":"cpu","artifacts":{"run":{"commands":["x"]}}}`, "node_id", false},
		{"no commands", `{"v":1,"run_id":"r","node_id":"n","attempt":1,"pool":"cpu","artifacts":{}}`, "artifacts: no commands", false},
		{"empty command", `{"v":1,"run_id":"r","node_id":"n","attempt":1,"pool":"cpu","artifacts":{"compile":{"commands":[" "]}}}`, "artifacts.compile.commands[0]: is empty", false},
		{"bad kind", `{"v":1,"run_id":"r","node_id":"n","attempt":1,"pool":"cpu","kind":"x","artifacts":{"run":{"commands":["x"]}}}`, "kind:", false},
		{"bad mode", `{"v":1,"run_id":"r","node_id":"n","attempt":1,"pool":"cpu","artifacts":{"run":{"commands":["x"]},"coding":{"workspace":{"files":[{"path":"a","content":"","mode":"4755"}]}}}}`, "files[0].mode", false},
		{"empty path", `{"v":1,"run_id":"r","node_id":"n","attempt":1,"pool":"cpu","artifacts":{"run":{"commands":["x"]},"coding":{"workspace":{"files":[{"path":"","content":""}]}}}}`, "files[0].path: is required", false},
		{"negative limit", `{"v":1,"run_id":"r","node_id":"n","attempt":1,"pool":"cpu","artifacts":{"run":{"commands":["x"]}},"limits":{"run_timeout_s":-1}}`, "limits.run_timeout_s", false},
		{"negative gpus", `{"v":1,"run_id":"r","node_id":"n","attempt":1,"pool":"cpu","artifacts":{"run":{"commands":["x"]}},"limits":{"gpus":-0.5}}`, "limits.gpus: -0.5, must be a number not below 0", false},
		{"gpus 1.5", `{"v":1,"run_id":"r","node_id":"n","attempt":1,"pool":"cpu","artifacts":{"run":{"commands":["x"]}},"limits":{"gpus":1.5}}`, "limits.gpus: 1.5: a share of a GPU is below 1", false},
		{"gpus too fine", `{"v":1,"run_id":"r","node_id":"n","attempt":1,"pool":"cpu","artifacts":{"run":{"commands":["x"]}},"limits":{"gpus":0.00005}}`, "limits.gpus: 5e-05: a share is in steps of 0.0001", false},
		{"gpus too many", `{"v":1,"run_id":"r","node_id":"n","attempt":1,"pool":"cpu","artifacts":{"run":{"commands":["x"]}},"limits":{"gpus":4096}}`, "limits.gpus: 4096, at most 1024", false},
		{"gpus string", `{"v":1,"run_id":"r","node_id":"n","attempt":1,"pool":"cpu","artifacts":{"run":{"commands":["x"]}},"limits":{"gpus":"0.5"}}`, "gpus", false},
		{"bad env", `{"v":1,"run_id":"r","node_id":"n","attempt":1,"pool":"cpu","artifacts":{"run":{"commands":["x"]}},"env":{"A=B":"c"}}`, "env: variable name", false},
		{"trailing", `{"v":1,"run_id":"r","node_id":"n","attempt":1,"pool":"cpu","artifacts":{"run":{"commands":["x"]}}} {}`, "after top-level value", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeTask([]byte(c.json))
			require.Error(t, err)
			require.ErrorIs(t, err, ErrInvalidMessage)
			require.Equal(t, c.version, errors.Is(err, ErrUnknownVersion))
			require.Contains(t, err.Error(), c.want)
		})
	}
}

func TestDecodeTaskTooBig(t *testing.T) {
	t.Parallel()
	big := `{"v":1,"pad":"` + strings.Repeat("x", MaxTaskBytes) + `"}`
	_, err := DecodeTask([]byte(big))
	require.ErrorIs(t, err, ErrInvalidMessage)
	require.Contains(t, err.Error(), "at most")
}

func TestDecodeResult(t *testing.T) {
	t.Parallel()
	r := &NodeResult{V: 1, RunID: "r", NodeID: "n", Attempt: 2, Worker: "w1",
		Phases:  []PhaseResult{{Name: PhaseRun, OK: false, ExitCode: 3}},
		Metrics: map[string]float64{"mlups": 12.5},
		Error:   &ResultError{Phase: PhaseRun, Kind: ErrKindRunFailed, Message: "exit 3"}}
	data, err := json.Marshal(r)
	require.NoError(t, err)
	got, err := DecodeResult(data)
	require.NoError(t, err)
	require.Equal(t, "r/n/2", got.MsgID())
	require.False(t, got.OK())
	require.Equal(t, 12.5, got.Metrics["mlups"])

	for name, c := range map[string]struct{ json, want string }{
		"version":   {`{"v":7}`, "unknown version"},
		"no worker": {`{"v":1,"run_id":"r","node_id":"n","attempt":1,"phases":[]}`, "worker: is required"},
		"bad kind":  {`{"v":1,"run_id":"r","node_id":"n","attempt":1,"worker":"w","phases":[],"error":{"phase":"run","kind":"oops","message":"m"}}`, "error.kind"},
		"no msg":    {`{"v":1,"run_id":"r","node_id":"n","attempt":1,"worker":"w","phases":[],"error":{"phase":"run","kind":"timeout"}}`, "error.message"},
		"phase":     {`{"v":1,"run_id":"r","node_id":"n","attempt":1,"worker":"w","phases":[{"ok":true}]}`, "phases[0].name"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := DecodeResult([]byte(c.json))
			require.ErrorIs(t, err, ErrInvalidMessage)
			require.Contains(t, err.Error(), c.want)
		})
	}
}

// FuzzDecodeTask: no input panics, and whatever decodes is valid and
// survives a round trip.
func FuzzDecodeTask(f *testing.F) {
	good, _ := json.Marshal(validTask())
	f.Add(good)
	f.Add([]byte(`{"v":2}`))
	f.Add([]byte(`{"v":1,"run_id":"../..","node_id":"n","attempt":1,"pool":"cpu","artifacts":{"run":{"commands":["x"]}}}`))
	f.Add([]byte(`{"v":1e400}`))
	f.Add([]byte(`{"v":1,"env":{"":""}}`))
	f.Add([]byte("\x00\xff{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		task, err := DecodeTask(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidMessage) {
				t.Fatalf("error does not wrap ErrInvalidMessage: %v", err)
			}
			return
		}
		if err := task.Validate(); err != nil {
			t.Fatalf("decoded task does not validate: %v", err)
		}
		again, err := json.Marshal(task)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeTask(again); err != nil {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func FuzzDecodeResult(f *testing.F) {
	f.Add([]byte(`{"v":1,"run_id":"r","node_id":"n","attempt":1,"worker":"w","phases":[]}`))
	f.Add([]byte(`{"v":1,"metrics":{"":1}}`))
	f.Add([]byte(`{"v":1,"run_id":"r","node_id":"n","attempt":1,"worker":"w","phases":[],"metrics":{"x":1e309}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeResult(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidMessage) {
				t.Fatalf("error does not wrap ErrInvalidMessage: %v", err)
			}
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("decoded result does not validate: %v", err)
		}
	})
}

// FuzzValidID: the hand-written id check agrees with its definition.
func FuzzValidID(f *testing.F) {
	re := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	for _, s := range []string{"a", "a..b", ".a", "a.", "a_b-c.d", "", "-", "é", "a b", "a/b", "A9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := re.MatchString(s) && !strings.Contains(s, "..")
		if got := validID(s); got != want {
			t.Fatalf("validID(%q) = %v, want %v", s, got, want)
		}
	})
}

func TestInstallValidation(t *testing.T) {
	t.Parallel()
	base := func() *NodeTask {
		return &NodeTask{V: Version, RunID: "r", NodeID: "n", Attempt: 1, Kind: "draft", Pool: "cpu",
			Install: &Install{Goal: "get zlib", MaxSteps: 12}}
	}
	require.NoError(t, base().Validate(), "an install alone is a task")
	for _, mod := range []func(*NodeTask){
		func(t *NodeTask) { t.Install.MaxSteps = 0 },
		func(t *NodeTask) { t.Install.MaxSteps = MaxInstallSteps + 1 },
		func(t *NodeTask) { t.Install.Goal = " " },
	} {
		task := base()
		mod(task)
		require.ErrorContains(t, task.Validate(), "install.")
	}
}

// benchTask is a task as the engine sends it: a workspace of a few files.
func benchTask() *NodeTask {
	t := validTask()
	t.Kind, t.Stage = KindImprove, 2
	t.Env = map[string]string{"OMP_NUM_THREADS": "4"}
	t.Artifacts.Coding.Workspace.Files = []File{
		{Path: "main.c", Content: strings.Repeat("for (int i = 0; i < n; i++) a[i] += b[i] * c;\n", 60), Mode: "0644"},
		{Path: "Makefile", Content: "all:\n\tgcc -O3 -fopenmp main.c -o main\n", Mode: "0644"},
		{Path: "run.sh", Content: "#!/bin/sh\n./main 1000000\n", Mode: "0755"},
	}
	return t
}

func BenchmarkDecodeTask(b *testing.B) {
	data, err := json.Marshal(benchTask())
	require.NoError(b, err)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeTask(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeResult(b *testing.B) {
	r := &NodeResult{V: 1, RunID: "run-1", NodeID: "n1", Attempt: 1, Pool: "cpu", Worker: "w1", Host: "c1",
		Started: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC), DurationMS: 1234,
		Phases:  []PhaseResult{{Name: PhaseCompile, OK: true, DurationMS: 800}, {Name: PhaseRun, OK: true, DurationMS: 400, ExitCode: 0}},
		Metrics: map[string]float64{"gflops": 12.5, "time_s": 0.4}}
	data, err := json.Marshal(r)
	require.NoError(b, err)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeResult(data); err != nil {
			b.Fatal(err)
		}
	}
}

// TestGPUShares: the amounts limits.gpus takes, and their units.
func TestGPUShares(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		gpus  float64
		units int
	}{{0, 0}, {0.25, 2500}, {0.5, 5000}, {0.0001, 1}, {0.3333, 3333}, {1, 10000}, {2, 20000}, {0.1 + 0.2, 3000}} {
		l := Limits{GPUs: c.gpus}
		require.NoError(t, l.checkGPUs(), "%v", c.gpus)
		require.Equal(t, c.units, l.GPUUnits(), "%v", c.gpus)
	}
	for _, g := range []float64{math.NaN(), math.Inf(1), -1, 1.25, 0.33333} {
		require.Error(t, Limits{GPUs: g}.checkGPUs(), "%v", g)
	}
}
