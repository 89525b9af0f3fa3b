// Package executor runs a task's phases on a worker: it writes the task's
// files into a fresh workspace (coding), runs the download, compile and run
// commands, each phase with its timeout, checks the expected outputs,
// extracts the metrics, and reports a NodeResult.
//
// # Workspace
//
// Each (node, attempt) gets a fresh directory,
// <runs>/<run_id>/workspaces/<node>/<attempt>. [schema.CheckFiles] rejects, before
// anything is written, paths that are absolute, climb out with "..", are
// not clean, hold control or format characters or invalid UTF-8, repeat, or
// exceed the count and size limits; [WriteFiles] writes through an os.Root,
// so no symlink can lead a write outside the workspace. The task's artifacts
// as received go to phase_logs/node_<id>/artifacts.json.
//
// # Commands
//
// [Run] runs one command line with bash -lc in a new process group, with
// optional resource limits ([Rlimits]). When the command's leader exits,
// whatever it left in its group is killed; on timeout or cancellation the
// group gets SIGTERM, then SIGKILL after a grace period. The group is
// signalled only while its leader is unreaped, so its id cannot belong to
// anything else. Each output stream goes to its own [Capture], which keeps
// the head and the tail within a fixed size, and both go to the phase's log
// file, phase_logs/node_<id>/<phase>.log.
//
// # Sandbox
//
// With a [Sandbox] (what [NewExecutor] sets up unless HPCQ_ISOLATION=off),
// each command runs in its own PID, mount, IPC and UTS namespaces (and a
// network namespace with loopback only for the compile and run phases of a
// task with limits.network false), as an unprivileged user when the worker
// is root, with the file system read-only outside the workspace and a
// private /tmp. The namespaces are made by a helper (internal/nsinit), the
// namespace's first process: the hpcq-sandbox binary beside the worker's
// executable, else the worker's own executable started again through
// /proc/self/exe, which an init in this package recognises. [NewSandbox] probes what
// the machine allows; each result's Isolation says what a task got.
//
// # Results
//
// Compile output is scanned for compiler diagnostics (gcc, clang,
// gfortran, nvcc, the linker). Metrics come from metrics.json, then METRIC
// lines on stdout, then the task's metric patterns; a value that is not a
// finite number is a bad_metric error.
//
// # Toolchains
//
// [DetectToolchains] probes compilers, OpenMP, MPI, nvcc and GPUs in one
// login shell; workers advertise the result and match it against a task's
// requires.
package executor
