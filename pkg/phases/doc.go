// Package phases runs a task's phases on a worker: it writes the task's
// files into a fresh workspace, then runs the download, compile and run
// commands, each phase with its timeout, and reports a NodeResult.
//
// # Workspace
//
// Each (node, attempt) gets a fresh directory,
// <runs>/<run_id>/workspaces/<node>/<attempt>. [CheckFiles] rejects, before
// anything is written, paths that are absolute, climb out with "..", are
// not clean, hold control characters or invalid UTF-8, repeat, or exceed
// the count and size limits; [WriteFiles] writes through an os.Root, so no
// symlink can lead a write outside the workspace.
//
// # Commands
//
// [Run] runs one command line with bash -lc in a new process group. When
// the command's leader exits, whatever it left in its group is killed; on
// timeout or cancellation the group gets SIGTERM, then SIGKILL after a
// grace period. The group is signalled only while its leader is unreaped,
// so its id cannot belong to anything else. Output goes to a [Capture],
// which keeps the head and the tail of a stream within a fixed size, and
// to the phase's log file, phase_logs/node_<id>/<phase>.log.
package phases
