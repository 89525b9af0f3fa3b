package schedcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/runview"
	"github.com/hpcq/hpcq/internal/term"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// LogsOptions are what `scheduler logs` is asked.
type LogsOptions struct {
	RunDir string
	Node   string
	// Phase is download, compile or run; "": every phase that ran.
	Phase string
	// Attempt: 0 is the node's last.
	Attempt int
	// Follow a running node's output until it ends.
	Follow bool
	Out    io.Writer
	Log    *slog.Logger
}

// logPhases are the phases that have logs, in order.
var logPhases = []string{schema.PhaseDownload, schema.PhaseCompile, schema.PhaseRun}

// Logs prints a node's phase logs: the ones brought into the run directory
// when the node has ended (another attempt's from the object store), or
// the live output of a running node (with Follow, until it ends).
func Logs(ctx context.Context, cfg *config.Scheduler, o LogsOptions) error {
	if o.Out == nil {
		// A program's output: its escape sequences made visible on a
		// terminal (term.Out), a character cut between two reads held.
		out := term.Out(os.Stdout)
		if c, ok := out.(io.Closer); ok {
			defer c.Close()
		}
		o.Out = out
	}
	if o.Phase != "" && !validPhase(o.Phase) {
		return fmt.Errorf("--phase %q: must be download, compile or run", o.Phase)
	}
	dir, err := runDirOf(cfg, o.RunDir)
	if err != nil {
		return err
	}
	lines, err := runview.ListNodes(dir)
	if err != nil {
		return err
	}
	var node *runview.NodeLine
	for i := range lines {
		if lines[i].Node == o.Node {
			node = &lines[i]
		}
	}
	if node == nil {
		return fmt.Errorf("run %s has no node %q (scheduler ls --run-dir %s lists them)", rundir.Dir(dir).ID(), o.Node, dir)
	}
	// A node running or ended has run: its logs are the run directory's.
	finished := !schema.Unfinished(node.Status) || node.Status == schema.NodeRunning
	if node.Status == schema.NodePreparing {
		return fmt.Errorf("node %s has not been published yet: its code is being asked of the model", o.Node)
	}
	if finished && (o.Attempt == 0 || o.Attempt == node.Attempt) {
		return storedLogs(dir, o)
	}
	q, closeQ, err := runQueue(ctx, cfg, dir, "hpcq-logs", finished, o.Log)
	if err != nil {
		return err
	}
	defer closeQ()
	attempt := o.Attempt
	if attempt == 0 {
		attempt = node.Attempt
	}
	if finished {
		return objectLogs(ctx, q, rundir.Dir(dir).ID(), o, attempt)
	}
	done := make(chan struct{})
	if o.Follow {
		go func() {
			defer close(done)
			nodeEnded(ctx, q, dir, o.Node, attempt)
		}()
	}
	return q.FollowLogs(ctx, rundir.Dir(dir).ID(), o.Node, attempt, o.Phase, o.Follow, done, o.Out)
}

// nodeEnded returns once the node's attempt has a result on the server, or
// the run recorded how the node ended (nodes/<id>/result.json: a canceled
// node's task may never answer), or ctx ends.
func nodeEnded(ctx context.Context, q *queue.Queue, dir, node string, attempt int) {
	results := make(<-chan *schema.NodeResult)
	if w, err := q.WatchRun(ctx, rundir.Dir(dir).ID(), time.Now().Add(-24*time.Hour)); err == nil {
		defer w.Close()
		results = w.Results
	}
	recorded := rundir.Dir(dir).Path(rundir.NodeFile(node, rundir.ResultFile))
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case r := <-results:
			if r.NodeID == node && r.Attempt == attempt {
				return
			}
		case <-tick.C:
			if _, err := os.Stat(recorded); err == nil {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

func validPhase(p string) bool {
	for _, x := range logPhases {
		if p == x {
			return true
		}
	}
	return false
}

// storedLogs prints the logs in nodes/<id>/logs.
func storedLogs(dir string, o LogsOptions) error {
	phases := logPhases
	if o.Phase != "" {
		phases = []string{o.Phase}
	}
	printed := 0
	for _, p := range phases {
		path := rundir.Dir(dir).Path(rundir.NodeFile(o.Node, rundir.LogsDir, p+".log"))
		f, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			if o.Phase != "" {
				return fmt.Errorf("node %s has no %s log in %s (the phase did not run, or its log did not come home: see %s)",
					o.Node, p, filepath.Dir(path), rundir.NodeFile(o.Node, rundir.ResultFile))
			}
			continue
		}
		if err != nil {
			return err
		}
		if o.Phase == "" {
			fmt.Fprintf(o.Out, "==> %s <==\n", rundir.NodeFile(o.Node, rundir.LogsDir, p+".log"))
		}
		_, err = io.Copy(o.Out, f)
		f.Close()
		if err != nil {
			return err
		}
		printed++
	}
	if printed == 0 {
		return fmt.Errorf("node %s has no logs in %s (it ran no command, or its logs did not come home: see %s)",
			o.Node, rundir.Dir(dir).Path(rundir.NodeFile(o.Node, rundir.LogsDir)), rundir.NodeFile(o.Node, rundir.ResultFile))
	}
	return nil
}

// objectLogs prints another attempt's logs from the artifacts object store.
func objectLogs(ctx context.Context, q *queue.Queue, run string, o LogsOptions, attempt int) error {
	store, err := q.Artifacts(ctx)
	if err != nil {
		return err
	}
	phases := logPhases
	if o.Phase != "" {
		phases = []string{o.Phase}
	}
	printed := 0
	for _, p := range phases {
		obj, err := store.Get(ctx, queue.ArtifactObject(run, o.Node, attempt, rundir.LogsDir, p+".log"))
		if err != nil {
			continue
		}
		if o.Phase == "" {
			fmt.Fprintf(o.Out, "==> %s attempt %d: %s.log <==\n", o.Node, attempt, p)
		}
		_, err = io.Copy(o.Out, obj)
		obj.Close()
		if err != nil {
			return fmt.Errorf("logs of node %s attempt %d: %w", o.Node, attempt, err)
		}
		printed++
	}
	if printed == 0 {
		return fmt.Errorf("no logs of node %s attempt %d in the object store (it did not run, or they are older than HPCQ_ARTIFACTS_MAX_AGE)", o.Node, attempt)
	}
	return nil
}
