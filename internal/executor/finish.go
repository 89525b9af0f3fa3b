// What follows a task's last phase: its files brought home, under one
// deadline (Config.FinishTimeout).

package executor

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hpcq/hpcq/internal/artifacts"
	"github.com/hpcq/hpcq/internal/fileio"
	"github.com/hpcq/hpcq/pkg/schema"
)

// finishClock starts when a task's last phase ends (or when it failed
// before: whatever comes first).
type finishClock struct{ at time.Time }

func (f *finishClock) start() {
	if f.at.IsZero() {
		f.at = time.Now()
	}
}

// context is bounded by limit from the clock's start, and not canceled
// with parent.
func (f *finishClock) context(parent context.Context, limit time.Duration) (context.Context, context.CancelFunc) {
	f.start()
	return context.WithDeadline(context.WithoutCancel(parent), f.at.Add(limit))
}

func (f *finishClock) passed(limit time.Duration) string {
	return fmt.Sprintf("the task's finish deadline (%v after its last phase, HPCQ_TASK_FINISH_TIMEOUT) passed: what was not looked at or uploaded by then was left", limit)
}

// joinNotes joins the non-empty notes with "; ".
func joinNotes(notes ...string) string {
	var out []string
	for _, n := range notes {
		if n = strings.Trim(n, "; "); n != "" {
			out = append(out, n)
		}
	}
	return strings.Join(out, "; ")
}

// artifactFiles are the files of an attempt to bring home: the phase logs,
// the expected outputs found, and the plots (*.png, *.svg) of the
// workspace, not following symbolic links; note says what the plot walk
// left out.
func (e *Executor) artifactFiles(ctx context.Context, t *schema.NodeTask, res *schema.NodeResult) (files []artifacts.File, note string) {
	logDir := e.LogDir(t)
	for _, p := range res.Phases {
		if p.Name == schema.PhaseCoding {
			continue
		}
		files = append(files, artifacts.File{Kind: schema.ArtifactLog, Name: p.Name + ".log", Dir: logDir, Rel: p.Name + ".log"})
	}
	ws := e.WorkspaceDir(t)
	outputs := map[string]bool{}
	for _, o := range res.OutputsFound {
		outputs[o] = true
		files = append(files, artifacts.File{Kind: schema.ArtifactOutput, Name: o, Dir: ws, Rel: o})
	}
	plots, note := findPlots(ctx, ws, outputs)
	for _, rel := range plots {
		files = append(files, artifacts.File{Kind: schema.ArtifactPlot, Name: filepath.ToSlash(rel), Dir: ws, Rel: rel})
	}
	return files, note
}

// readSmall reads name from root, refusing more than limit bytes and
// anything but a regular file (opened without following a link or
// blocking: a named pipe there does not hold the slot).
func readSmall(root *os.Root, name string, limit int64) ([]byte, error) {
	f, fi, err := fileio.OpenRegular(root, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, at most %d", name, fi.Size(), limit)
	}
	return io.ReadAll(io.LimitReader(f, limit))
}
