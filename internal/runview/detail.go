package runview

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// LogTailBytes is how much of the end of each log a Node carries.
const LogTailBytes = 8 << 10

// maxFileBytes bounds what Node reads of one file of the run directory (a
// plan, a task): a larger one is reported, not read.
const maxFileBytes = 16 << 20

// ErrNoNode: the run has no node of that id.
var ErrNoNode = errors.New("no such node")

// Node is everything the run directory knows of one node: what it is and
// where it stands (NodeLine), its plan, its code and commands, how each
// phase went, its metrics and diagnostics, and its files brought home.
type Node struct {
	NodeLine
	// Branch is the node's memory branch.
	Branch string `json:"branch,omitempty"`
	// Plan is the node's Phase 0 plan (nodes/<id>/phase0_plan.json).
	Plan json.RawMessage `json:"plan,omitempty"`
	// Files are the code written into the workspace; Commands the commands
	// of the download, compile and run phases.
	Files    []File              `json:"files,omitempty"`
	Commands map[string][]string `json:"commands,omitempty"`
	Env      map[string]string   `json:"env,omitempty"`
	Requires []string            `json:"requires,omitempty"`
	// Phases, Metrics, Diagnostics and Error are the worker's result.
	Phases      []Phase             `json:"phases,omitempty"`
	Metrics     map[string]float64  `json:"metrics,omitempty"`
	MetricUnits map[string]string   `json:"metric_units,omitempty"`
	Diagnostics []schema.Diagnostic `json:"diagnostics,omitempty"`
	Error       *schema.ResultError `json:"error,omitempty"`
	Toolchain   map[string]string   `json:"toolchain,omitempty"`
	Limits      *schema.Enforced    `json:"limits,omitempty"`
	// Container is the image the node's commands ran in.
	Container *schema.ContainerUsed `json:"container,omitempty"`
	// Logs, Outputs and Plots are the files in nodes/<id>/.
	Logs    []FileRef `json:"logs,omitempty"`
	Outputs []FileRef `json:"outputs,omitempty"`
	Plots   []FileRef `json:"plots,omitempty"`
	// ArtifactsNote says what was left out on the worker; ArtifactsError
	// why files could not be brought home.
	ArtifactsNote  string `json:"artifacts_note,omitempty"`
	ArtifactsError string `json:"artifacts_error,omitempty"`
	// Summary is the model's summary of the node; Review the execution
	// review's verdict; MetricFrom where the metric came from when the
	// model read it (parse_metrics).
	Summary    string         `json:"summary,omitempty"`
	Review     *rundir.Review `json:"review,omitempty"`
	MetricFrom string         `json:"metric_from,omitempty"`
	// PlotAnalysis is the vision model's analysis of the node's plots.
	PlotAnalysis string `json:"plot_analysis,omitempty"`
	// Prompts are the node's readable prompt log: nodes/<id>/prompts.md
	// (prompt_logs/<id>/NNN_<purpose>.md, one per exchange, in runs written
	// before).
	Prompts []FileRef `json:"prompts,omitempty"`
	// Children are the nodes grown from this one.
	Children []string `json:"children,omitempty"`
}

// File is one file of a node's code.
type File struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	Mode    string `json:"mode,omitempty"`
}

// Phase is how one phase went.
type Phase struct {
	Name       string    `json:"name"`
	OK         bool      `json:"ok"`
	ExitCode   int       `json:"exit_code"`
	Started    time.Time `json:"started,omitzero"`
	DurationMS int64     `json:"duration_ms"`
}

// FileRef is a file of a node in the run directory. Path is relative to
// the run directory (slash-separated); Tail is the end of a log.
type FileRef struct {
	Name  string `json:"name"`
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
	Tail  string `json:"tail,omitempty"`
	// Truncated: Tail is not the whole file.
	Truncated bool `json:"truncated,omitempty"`
}

// IsPlot says whether a file is shown as a picture.
func IsPlot(name string) bool {
	switch strings.ToLower(path.Ext(name)) {
	case ".png", ".svg", ".jpg", ".jpeg", ".gif", ".webp":
		return true
	}
	return false
}

// ReadNode reads node id of the run in dir. lines are the run's nodes as
// ListNodes returned them (to find the node's line and its children
// without reading the tree again).
func ReadNode(dir string, id string, lines []NodeLine) (*Node, error) {
	if err := schema.CheckID("node id", id, true); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoNode, err)
	}
	n := &Node{}
	found := false
	for _, l := range lines {
		if l.Node == id {
			n.NodeLine, found = l, true
		}
		if l.Parent == id {
			n.Children = append(n.Children, l.Node)
		}
	}
	if !found {
		return nil, fmt.Errorf("%w: %s", ErrNoNode, id)
	}
	d := rundir.Dir(dir)
	data, err := readSmall(d.Path(rundir.NodeFile(id, rundir.Phase0Plan)))
	if errors.Is(err, fs.ErrNotExist) { // a run written before a node's files shared its directory
		data, err = readSmall(d.Path(rundir.OldPhase0Plan(id)))
	}
	if err == nil && json.Valid(data) {
		n.Plan = data
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := n.readTask(d.Path(rundir.NodeFile(id, rundir.TaskFile))); err != nil {
		return nil, err
	}
	if err := n.readResult(d.Path(rundir.NodeFile(id, rundir.ResultFile))); err != nil {
		return nil, err
	}
	if n.Logs, err = listFiles(d, rundir.NodeFile(id, rundir.LogsDir), true); err != nil {
		return nil, err
	}
	outputs, err := listFiles(d, rundir.NodeFile(id, rundir.OutputsDir), false)
	if err != nil {
		return nil, err
	}
	for _, f := range outputs {
		if IsPlot(f.Name) {
			n.Plots = append(n.Plots, f)
		} else {
			n.Outputs = append(n.Outputs, f)
		}
	}
	n.Prompts = prompts(d, id)
	return n, nil
}

// prompts lists node id's readable prompt logs.
func prompts(d rundir.Dir, id string) []FileRef {
	rel := rundir.NodeFile(id, rundir.PromptsLog)
	if fi, err := os.Stat(d.Path(rel)); err == nil && fi.Mode().IsRegular() {
		return []FileRef{{Name: rundir.PromptsLog, Path: rel, Bytes: fi.Size()}}
	}
	// A run written before: one file per exchange.
	entries, err := os.ReadDir(d.Path(path.Join(rundir.OldPromptLogs, id)))
	if err != nil {
		return nil
	}
	var refs []FileRef
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && strings.HasSuffix(e.Name(), ".md") {
			refs = append(refs, FileRef{Name: e.Name(), Path: path.Join(rundir.OldPromptLogs, id, e.Name()), Bytes: fi.Size()})
		}
	}
	return refs
}

func (n *Node) readTask(p string) error {
	data, err := readSmall(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // not published yet
	}
	if err != nil {
		return err
	}
	var t schema.NodeTask
	if err := json.Unmarshal(data, &t); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	for _, f := range t.Artifacts.Coding.Workspace.Files {
		n.Files = append(n.Files, File{Path: f.Path, Content: f.Content, Mode: string(f.Mode)})
	}
	n.Commands = map[string][]string{}
	for phase, cmds := range map[string][]string{
		schema.PhaseDownload: t.Artifacts.Download.Commands,
		schema.PhaseCompile:  t.Artifacts.Compile.Commands,
		schema.PhaseRun:      t.Artifacts.Run.Commands,
	} {
		if len(cmds) > 0 {
			n.Commands[phase] = cmds
		}
	}
	n.Env, n.Requires, n.Branch = t.Env, t.Requires, t.BranchID
	return nil
}

func (n *Node) readResult(p string) error {
	if fi, err := os.Stat(p); err == nil && fi.Size() > maxFileBytes {
		return fmt.Errorf("%s is %d bytes, more than the %d read for a view", p, fi.Size(), maxFileBytes)
	}
	rec, ok, err := rundir.ReadOutcomeFile(p)
	if err != nil || !ok {
		return err
	}
	n.ArtifactsError, n.Summary, n.Review, n.MetricFrom = rec.ArtifactsError, rec.Summary, rec.Review, rec.MetricFrom
	n.PlotAnalysis = rec.PlotAnalysis
	r := rec.Result
	if r == nil {
		return nil
	}
	for _, ph := range r.Phases {
		n.Phases = append(n.Phases, Phase{Name: ph.Name, OK: ph.OK, ExitCode: ph.ExitCode, Started: ph.Started, DurationMS: ph.DurationMS})
	}
	n.Metrics, n.MetricUnits, n.Diagnostics, n.Error = r.Metrics, r.MetricUnits, r.Diagnostics, r.Error
	n.Toolchain, n.Limits, n.ArtifactsNote, n.Container = r.Toolchain, r.Limits, r.ArtifactsNote, r.Container
	return nil
}

// listFiles lists the regular files under rel (a node's logs or outputs),
// with the tail of each when tails is set. Links are not followed.
func listFiles(d rundir.Dir, rel string, tails bool) ([]FileRef, error) {
	root := d.Path(rel)
	var out []FileRef
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == root {
				return nil
			}
			return err
		}
		if !e.Type().IsRegular() {
			return nil
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		name, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		f := FileRef{Name: filepath.ToSlash(name), Path: path.Join(rel, filepath.ToSlash(name)), Bytes: fi.Size()}
		if tails {
			if f.Tail, f.Truncated, err = Tail(p, LogTailBytes); err != nil {
				return err
			}
		}
		out = append(out, f)
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

// Tail returns the last n bytes of a file (from the start of a line when
// it is cut), and whether it was cut.
func Tail(p string, n int64) (string, bool, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", false, err
	}
	off := max(fi.Size()-n, 0)
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return "", false, err
	}
	data, err := io.ReadAll(io.LimitReader(f, n))
	if err != nil {
		return "", false, err
	}
	if off > 0 {
		if i := strings.IndexByte(string(data), '\n'); i >= 0 && i < len(data)-1 {
			data = data[i+1:]
		}
	}
	return strings.ToValidUTF8(string(data), "\uFFFD"), off > 0, nil
}

func readSmall(p string) ([]byte, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if fi.Size() > maxFileBytes {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d read for a view", p, fi.Size(), maxFileBytes)
	}
	return os.ReadFile(p)
}
