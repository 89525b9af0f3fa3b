// Package rundir owns the layout of a run directory (runs/<run_id>/): the
// names of its files and directories, and run.json, the record of how the
// run was started, one schema for `scheduler run` and `scheduler exec`.
// Every package that reads or writes a run directory takes its paths from
// here.
package rundir

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/hpcq/hpcq/internal/fileio"
	"github.com/hpcq/hpcq/pkg/schema"
)

// Names inside a run directory.
const (
	InfoFile    = "run.json"                  // Info
	SpecFile    = "spec.json"                 // the resolved run.yaml, for --resume and later runs of the idea
	ResultsFile = "hpcq.sqlite"               // the results tables of a run without ClickHouse
	NATSDir     = "nats"                      // the embedded JetStream store (local mode)
	ServerFile  = "server.json"               // how to reach a going local run's embedded server (mode 0600)
	JournalDir  = "journal"                   // the tree journal, result cache, LLM usage
	TreeJournal = "journal/tree.journal"      // the tree search's journal (search.OpenTree)
	EndFile     = "journal/end.json"          // how the run's last session ended (End); none while it goes
	UsageFile   = "journal/usage.json"        // the LLM usage the budget counts on a resume
	LLMCacheDir = "llm-cache"                 // replies of reproducible LLM requests (llm.Cache)
	NodesDir    = "nodes"                     // nodes/<id>/: every file of a node (NodeFile)
	MemoryDir   = "memory"                    // the memory's files
	MemoryDB    = "memory/memory.sqlite"      // the local memory store
	MemoryCalls = "memory/memory_calls.jsonl" // every memory operation
)

// Dir is a run directory; its base name is the run id.
type Dir string

// Files of a node, in nodes/<id>/ (NodeFile). A node's files share its one
// directory: every file or directory created is a metadata operation (on a
// cluster's shared file system, a round trip to its metadata server), and
// creating one in a small directory costs less than in one of 10,000 entries.
const (
	TaskFile     = "task.json"                // the task as published
	ResultFile   = "result.json"              // how the node ended
	Phase0Plan   = "phase0_plan.json"         // its Phase 0 plan
	Phase0Reply  = "phase0_llm_output.txt"    // the model's raw Phase 0 reply
	Phase0Given  = "phase0_history_full.json" // what the Phase 0 prompt was given
	PromptsLog   = "prompts.md"               // every prompt and reply of the node, readable, in order
	PromptsJSONL = "prompts.jsonl"            // the same, one JSON object per exchange
)

// Places of runs written before a node's files shared its directory: the
// dashboard and --resume still read them.
const (
	OldPlansDir   = "plans"       // plans/<id>/phase0_plan.json ...
	OldPromptLogs = "prompt_logs" // prompt_logs/<id>/NNN_<purpose>.{md,json}, one pair per exchange
)

// OldPhase0Plan is the slash-separated path, relative to the run directory,
// of node's Phase 0 plan in a run written before: plans/<id>/phase0_plan.json.
func OldPhase0Plan(node string) string { return path.Join(OldPlansDir, node, Phase0Plan) }

// A node's directories of the files its attempts brought home (also the
// kinds' directories in the object store's names: schema.Artifact.Dir).
const (
	LogsDir    = "logs"    // nodes/<id>/logs/<phase>.log
	OutputsDir = "outputs" // nodes/<id>/outputs/<name>: the expected outputs and plots
)

// NodeFile is the slash-separated path, relative to the run directory, of
// a file of a node: nodes/<id>/<elem>...; artifacts land at
// NodeFile(id, LogsDir, "<phase>.log") and NodeFile(id, OutputsDir, name).
func NodeFile(node string, elem ...string) string {
	return path.Join(append([]string{NodesDir, node}, elem...)...)
}

// Path is the path of name (one of the names above) in d.
func (d Dir) Path(name string) string { return filepath.Join(string(d), filepath.FromSlash(name)) }

// Server is server.json: the address and credentials of a local run's
// embedded server while the run goes, for other processes (scheduler
// status, ls, logs, cancel).
type Server struct {
	URL      string `json:"url"`
	User     string `json:"user"`
	Password string `json:"password"`
	PID      int    `json:"pid"`
}

// WriteServer writes server.json, readable by its owner only.
func (d Dir) WriteServer(s Server) error {
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	p := d.Path(ServerFile)
	tmp := p + ".tmp"
	_ = os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// ErrNotRunning: a local run has no server.json: it is not going.
var ErrNotRunning = errors.New("the run is not going")

// ReadServer reads server.json. It refuses a file others can read: its
// password would not be a secret.
func (d Dir) ReadServer() (Server, error) {
	var s Server
	p := d.Path(ServerFile)
	fi, err := os.Stat(p)
	if errors.Is(err, os.ErrNotExist) {
		return s, fmt.Errorf("%w (%s has no %s)", ErrNotRunning, string(d), ServerFile)
	}
	if err != nil {
		return s, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return s, fmt.Errorf("%s is mode %v: it holds a password, it must be readable by its owner only (chmod 600)", p, fi.Mode().Perm())
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("%s: %w", p, err)
	}
	return s, nil
}

// ID is the run id.
func (d Dir) ID() string { return filepath.Base(string(d)) }

// Info is run.json: how the run was started, without secrets.
type Info struct {
	RunID   string `json:"run_id"`
	Command string `json:"command"` // run or exec
	Mode    string `json:"mode"`    // local or cluster
	// IdeaDir is the idea directory of a `scheduler run`.
	IdeaDir string `json:"idea_dir,omitempty"`
	// NATSURL is "embedded" in local mode, else the URL without credentials.
	NATSURL string `json:"nats_url"`
	// Results says where the results tables are: store sqlite (file) or
	// clickhouse.
	Results map[string]string `json:"results"`
	// Memory says where the memory is (a `scheduler run`).
	Memory map[string]string `json:"memory,omitempty"`
	// LLM says which model or cassette answered (a `scheduler run`).
	LLM          map[string]string `json:"llm,omitempty"`
	Version      string            `json:"version"`
	Started      time.Time         `json:"started"`
	Resumes      int               `json:"resumes"`
	LocalWorkers int               `json:"local_workers"`
	Slots        int               `json:"slots"`
	// Tasks is the number of tasks of a `scheduler exec`.
	Tasks int `json:"tasks,omitempty"`
	// Queue are the queue settings of a `scheduler exec`.
	Queue map[string]any `json:"queue,omitempty"`
}

// ErrNoRun: the directory holds no run.json.
var ErrNoRun = errors.New("not a run directory: it has no run.json")

// ReadInfo reads run.json; a directory without one is ErrNoRun.
func (d Dir) ReadInfo() (Info, error) {
	var info Info
	data, err := os.ReadFile(d.Path(InfoFile))
	if errors.Is(err, os.ErrNotExist) {
		return info, fmt.Errorf("%s: %w", d, ErrNoRun)
	}
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(data, &info); err != nil {
		return info, fmt.Errorf("%s: %w", d.Path(InfoFile), err)
	}
	return info, nil
}

// WriteInfo writes run.json through a temporary file and a rename.
func (d Dir) WriteInfo(info Info) error {
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	return fileio.WriteFileAtomic(d.Path(InfoFile), append(data, '\n'))
}

// ArtifactDir is the node directory an artifact goes to: LogsDir for a
// log, OutputsDir for an output.
func ArtifactDir(a schema.Artifact) string {
	if a.Kind == schema.ArtifactLog {
		return LogsDir
	}
	return OutputsDir
}
