package schema

import (
	"fmt"
	"math"
	"path"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Error kinds of a NodeResult. All but ErrKindInfra are failures of the
// task itself: the node's result, acked and not retried.
const (
	ErrKindInvalidTask      = "invalid_task"
	ErrKindInvalidWorkspace = "invalid_workspace"
	ErrKindInstallFailed    = "install_failed"
	ErrKindCompileFailed    = "compile_failed"
	ErrKindRunFailed        = "run_failed"
	ErrKindTimeout          = "timeout"
	ErrKindMissingOutput    = "missing_output"
	ErrKindBadMetric        = "bad_metric"
	ErrKindToolchainMissing = "toolchain_missing"
	ErrKindCanceled         = "canceled"
	// ErrKindInfra: the worker or the machine failed, not the task.
	ErrKindInfra = "infra"
)

// CheckMetricName reports whether name can name a metric: 1 to
// MaxMetricNameLen bytes of letters, digits and _ . - / :.
func CheckMetricName(name string) error {
	if name == "" || len(name) > MaxMetricNameLen {
		return fmt.Errorf("metric name %q must be 1 to %d bytes", name, MaxMetricNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_.-/:", c) >= 0) {
			return fmt.Errorf("metric name %q may contain only letters, digits and _ . - / :", name)
		}
	}
	return nil
}

// Phase names as they appear in NodeResult.Phases.
const (
	PhaseCoding   = "coding"
	PhaseDownload = "download"
	PhaseCompile  = "compile"
	PhaseRun      = "run"
)

// NodeResult is what a worker reports for one (node, attempt), published on
// hpcq.results.<run>.
type NodeResult struct {
	V          int                `json:"v"`
	RunID      string             `json:"run_id"`
	NodeID     string             `json:"node_id"`
	Attempt    int                `json:"attempt"`
	Pool       string             `json:"pool,omitempty"`
	Worker     string             `json:"worker"`
	Started    time.Time          `json:"started"`
	DurationMS int64              `json:"duration_ms"`
	Phases     []PhaseResult      `json:"phases"`
	Metrics    map[string]float64 `json:"metrics,omitempty"`
	// MetricUnits gives the unit of a metric when its source named one.
	MetricUnits  map[string]string `json:"metric_units,omitempty"`
	OutputsFound []string          `json:"outputs_found,omitempty"`
	// Diagnostics are the first compiler diagnostics of a failed compile.
	Diagnostics []Diagnostic      `json:"diagnostics,omitempty"`
	Error       *ResultError      `json:"error,omitempty"`
	Toolchain   map[string]string `json:"toolchain,omitempty"`
	// Isolation is what the task's commands ran in; Container the image,
	// when the task named one.
	Isolation *Isolation     `json:"isolation,omitempty"`
	Container *ContainerUsed `json:"container,omitempty"`
	// Evaluation is what the idea's evaluator found (a task with Evaluate
	// whose own phases succeeded).
	Evaluation *Evaluation `json:"evaluation,omitempty"`
	// Host and SlurmJobID say where the worker ran.
	Host       string `json:"host,omitempty"`
	SlurmJobID string `json:"slurm_job_id,omitempty"`
	// Exclusive says how alone the task ran, for a task that asked to
	// (NodeTask.Exclusive): ExclusiveWorker, no other task on its worker;
	// ExclusiveNode, nor any other job on the node (the worker's Slurm
	// allocation is exclusive). "" for a task that did not ask.
	Exclusive string `json:"exclusive,omitempty"`
	// HostBound is what that host can do at most (its peak FLOP/s, its
	// memory bandwidth): a metric beyond it is impossible.
	HostBound *HostBound `json:"host_bound,omitempty"`
	// Artifacts are the files of the attempt stored in the object store
	// (phase logs, declared outputs, plots), to be fetched into the run
	// directory; ArtifactsNote says what was left out and why.
	Artifacts     []Artifact `json:"artifacts,omitempty"`
	ArtifactsNote string     `json:"artifacts_note,omitempty"`
	// Limits says how the task's resource limits were enforced.
	Limits *Enforced `json:"limits,omitempty"`
	// RecallStored counts the recall events the worker stored in the
	// node's branch; RecallPending are those it could not (no memory
	// store configured, or a write failed), for the scheduler to store.
	RecallStored  int           `json:"recall_stored,omitempty"`
	RecallPending []RecallEvent `json:"recall_pending,omitempty"`
}

// How alone an exclusive task ran (NodeResult.Exclusive).
const (
	ExclusiveWorker = "worker"
	ExclusiveNode   = "node"
)

// Artifact kinds: a phase log goes to the node's logs/ directory, an output
// or a plot to its outputs/ directory.
const (
	ArtifactLog    = "log"
	ArtifactOutput = "output"
	ArtifactPlot   = "plot"
)

// MaxArtifacts is the most artifacts one result lists.
const MaxArtifacts = 512

// Artifact is one file of an attempt brought home.
type Artifact struct {
	Kind string `json:"kind"`
	// Name is the file's path under the node's logs/ (a log: <phase>.log)
	// or outputs/ directory (its path in the workspace).
	Name   string `json:"name"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Enforced says how a task's resource limits were enforced on the worker.
type Enforced struct {
	// CPUs the task's processes were bound to (a cpuset list, "0-3"); empty
	// when the worker could not bind them.
	CPUs string `json:"cpus,omitempty"`
	// Memory is the mechanism of the memory limit: "cgroup" (a cgroup v2
	// memory.max), "cgroup-v1" (memory.limit_in_bytes), "rlimit"
	// (RLIMIT_AS, the last resort), or "" with no limit.
	Memory   string `json:"memory,omitempty"`
	MemoryMB int    `json:"memory_mb,omitempty"`
	// Pids is the process limit the task ran under, PidsBy its mechanism:
	// "cgroup" (a cgroup v2 pids.max), "cgroup-v1" (a v1 pids.max) or
	// "rlimit" (RLIMIT_NPROC of a uid the task's slot has alone). PidsPeak
	// is the most processes and threads it had at once (0: not known).
	Pids     int    `json:"pids,omitempty"`
	PidsBy   string `json:"pids_by,omitempty"`
	PidsPeak int64  `json:"pids_peak,omitempty"`
	// DiskMB is the bound of the workspace on disk the task ran under.
	DiskMB int `json:"disk_mb,omitempty"`
	// GPUs given to the task (CUDA_VISIBLE_DEVICES): its alone, or with
	// GPUShare set a share of each (limits.gpus below 1) that other tasks
	// share, by GPUSharing: "mps" (the site's MPS daemon holds the task to
	// its share of the multiprocessors) or "time-slicing" (the tasks take
	// turns on the device; the share is counted, not enforced).
	GPUs       []string `json:"gpus,omitempty"`
	GPUShare   float64  `json:"gpu_share,omitempty"`
	GPUSharing string   `json:"gpu_sharing,omitempty"`
	// Nodes, Ranks and Hosts: a multi-node task's run phase spanned Nodes
	// hosts of the worker's allocation (Hosts, in rank order) with Ranks MPI
	// ranks in all, launched by MPILaunch ($HPCQ_MPIRUN).
	Nodes     int      `json:"nodes,omitempty"`
	Ranks     int      `json:"ranks,omitempty"`
	Hosts     []string `json:"hosts,omitempty"`
	MPILaunch string   `json:"mpi_launch,omitempty"`
	// Note says what could not be enforced and why.
	Note string `json:"note,omitempty"`
}

// CheckArtifactName checks an artifact's name: a clean relative path of at
// most 1024 bytes without control or format characters.
func CheckArtifactName(p string) error {
	switch {
	case p == "" || len(p) > 1024 || !utf8.ValidString(p):
		return fmt.Errorf("%q: empty, longer than 1024 bytes or not UTF-8", firstBytes([]byte(p), 64))
	case strings.HasPrefix(p, "/") || strings.Contains(p, `\`) || path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../"):
		return fmt.Errorf("%q: not a clean relative path", p)
	}
	for _, r := range p {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return fmt.Errorf("%q: contains a control or format character (%U)", p, r)
		}
	}
	return nil
}

// Isolation is the sandbox a task's commands ran in.
type Isolation struct {
	// Mode is "namespaces" (own PID and mount namespaces) or "none" (a
	// process group).
	Mode string `json:"mode"`
	// PIDNamespace: the commands could neither see nor signal a process
	// outside, and none outlived the task or the worker.
	PIDNamespace bool `json:"pid_namespace"`
	// User the commands ran as, "name (uid)".
	User string `json:"user"`
	// FilesystemHidden: outside the workspace (and the worker's writable
	// directories) the file system was read-only, /tmp private.
	FilesystemHidden bool `json:"filesystem_hidden"`
	// Network: the compile and run phases had the network (downloads
	// always do).
	Network bool `json:"network"`
	// Note says what could not be had and why.
	Note string `json:"note,omitempty"`
}

// PhaseResult is one phase of a node as it ran.
type PhaseResult struct {
	Name       string    `json:"name"`
	OK         bool      `json:"ok"`
	ExitCode   int       `json:"exit_code"`
	Started    time.Time `json:"started"`
	DurationMS int64     `json:"duration_ms"`
	LogTail    string    `json:"log_tail,omitempty"`
	LogRef     string    `json:"log_ref,omitempty"`
}

// Diagnostic is one compiler message: file:line:col: severity: message.
type Diagnostic struct {
	File     string `json:"file"`
	Line     int    `json:"line"`
	Column   int    `json:"column,omitempty"`
	Severity string `json:"severity"`
	Message  string `json:"message"`
}

// ResultError says which phase failed, how, and why.
type ResultError struct {
	Phase   string `json:"phase"`
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// OK reports whether every phase of the node succeeded.
func (r *NodeResult) OK() bool { return r.Error == nil }

// MsgID is the Nats-Msg-Id of the result; a second publish of the same
// (run, node, attempt) is dropped by the server.
func (r *NodeResult) MsgID() string { return msgID(r.RunID, r.NodeID, r.Attempt) }

var validErrKinds = map[string]bool{
	ErrKindInvalidTask: true, ErrKindInvalidWorkspace: true, ErrKindImage: true, ErrKindInstallFailed: true,
	ErrKindCompileFailed: true, ErrKindRunFailed: true, ErrKindTimeout: true,
	ErrKindMissingOutput: true, ErrKindBadMetric: true, ErrKindToolchainMissing: true,
	ErrKindCanceled: true, ErrKindInfra: true, ErrKindIncorrect: true, ErrKindEvaluateFailed: true,
}

// Validate checks the result's version and content; the error names the field.
func (r *NodeResult) Validate() error {
	if r.V != Version {
		return fmt.Errorf("%w: v: %d (this build reads version %d)", ErrUnknownVersion, r.V, Version)
	}
	if err := CheckToken("run_id", r.RunID, true); err != nil {
		return err
	}
	if err := CheckID("node_id", r.NodeID, true); err != nil {
		return err
	}
	if r.Attempt < 1 {
		return fieldErr("attempt", "%d, must be >= 1", r.Attempt)
	}
	if r.Worker == "" {
		return fieldErr("worker", "is required")
	}
	for i, p := range r.Phases {
		if p.Name == "" {
			return fieldErr(fmt.Sprintf("phases[%d].name", i), "is required")
		}
	}
	for name, v := range r.Metrics {
		if err := CheckMetricName(name); err != nil {
			return fieldErr("metrics", "%v", err)
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fieldErr("metrics."+name, "%v is not a finite number", v)
		}
	}
	if err := r.HostBound.Validate(); err != nil {
		return err
	}
	if len(r.RecallPending) > MaxRecallEvents {
		return fieldErr("recall_pending", "%d events, at most %d", len(r.RecallPending), MaxRecallEvents)
	}
	for i, ev := range r.RecallPending {
		if ev.Kind == "" || len(ev.Kind) > 64 {
			return fieldErr(fmt.Sprintf("recall_pending[%d].kind", i), "empty or longer than 64 bytes")
		}
		if len(ev.Payload) > MaxRecallPayloadBytes {
			return fieldErr(fmt.Sprintf("recall_pending[%d].payload", i), "%d bytes, at most %d", len(ev.Payload), MaxRecallPayloadBytes)
		}
	}
	if len(r.Artifacts) > MaxArtifacts {
		return fieldErr("artifacts", "%d, at most %d", len(r.Artifacts), MaxArtifacts)
	}
	seen := make(map[string]bool, len(r.Artifacts))
	for i, a := range r.Artifacts {
		f := fmt.Sprintf("artifacts[%d]", i)
		switch a.Kind {
		case ArtifactLog, ArtifactOutput, ArtifactPlot:
		default:
			return fieldErr(f+".kind", "%q: must be log, output or plot", a.Kind)
		}
		if err := CheckArtifactName(a.Name); err != nil {
			return fieldErr(f+".name", "%v", err)
		}
		// Logs go to one directory of the node, outputs and plots to another.
		home := "an output"
		if a.Kind == ArtifactLog {
			home = "a log"
		}
		if seen[home+"\x00"+a.Name] {
			return fieldErr(f+".name", "%s listed twice as %s", a.Name, home)
		}
		seen[home+"\x00"+a.Name] = true
		if a.Bytes < 0 {
			return fieldErr(f+".bytes", "%d, must be >= 0", a.Bytes)
		}
		if len(a.SHA256) != 64 || strings.Trim(a.SHA256, "0123456789abcdef") != "" {
			return fieldErr(f+".sha256", "%q: must be 64 lower-case hex digits", firstBytes([]byte(a.SHA256), 80))
		}
	}
	if err := r.Evaluation.Validate(); err != nil {
		return err
	}
	return r.Error.validate()
}

// validate checks a result's error; nil is none.
func (e *ResultError) validate() error {
	switch {
	case e == nil:
		return nil
	case !validErrKinds[e.Kind]:
		return fieldErr("error.kind", "%q is not a known error kind", e.Kind)
	case e.Message == "":
		return fieldErr("error.message", "is required")
	}
	return nil
}

// DecodeResult parses and validates a result.
func DecodeResult(data []byte) (*NodeResult, error) {
	if len(data) > MaxResultBytes {
		return nil, fmt.Errorf("%w: result is %d bytes, at most %d", ErrInvalidMessage, len(data), MaxResultBytes)
	}
	var r NodeResult
	if err := decodeVersioned(data, &r, &r.V); err != nil {
		return nil, err
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return &r, nil
}
