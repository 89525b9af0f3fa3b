// A task's workspace and phase log files.

package executor

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hpcq/hpcq/internal/jsonw"
	"github.com/hpcq/hpcq/pkg/schema"
)

// phaseLogs are the open log files of a task's phases, by phase name.
type phaseLogs struct {
	files map[string]*os.File
	err   error
}

// openLogs creates dir, writes artifacts.json (the task's artifacts as
// received) in it, and opens one <phase>.log per name, truncated.
func openLogs(dir string, names []string, artifacts *schema.Artifacts) phaseLogs {
	l := phaseLogs{files: make(map[string]*os.File, len(names))}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		l.err = fmt.Errorf("create log dir: %w", err)
		return l
	}
	data, err := jsonw.MarshalIndent(artifacts)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "artifacts.json"), append(data, '\n'), 0o644)
	}
	if err != nil {
		l.err = fmt.Errorf("write artifacts.json: %w", err)
		return l
	}
	for _, n := range names {
		f, err := os.OpenFile(filepath.Join(dir, n+".log"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			l.err = fmt.Errorf("open phase log: %w", err)
			return l
		}
		l.files[n] = f
	}
	return l
}

func (l phaseLogs) close() {
	for _, f := range l.files {
		f.Close()
	}
}

// freshDir makes dir an empty directory, creating its parents as needed.
// The common case (a first delivery) costs one mkdir.
func freshDir(dir string) error {
	// 0700: other users of the machine do not read a task's workspace
	// (the sandbox hides the others from a task).
	err := os.Mkdir(dir, 0o700)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrExist):
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	return os.Mkdir(dir, 0o700)
}

// cappedWriter writes up to left bytes, then a marker once, then discards.
type cappedWriter struct {
	w      io.Writer
	left   int64
	marked bool
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	n := len(p)
	if c.left <= 0 {
		if !c.marked {
			c.marked = true
			_, _ = io.WriteString(c.w, "\n[hpcq: log size limit reached, the rest of the output is not logged]\n")
		}
		return n, nil
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	c.left -= int64(len(p))
	if _, err := c.w.Write(p); err != nil {
		c.left = 0 // a full disk must not fail the command
	}
	return n, nil
}
