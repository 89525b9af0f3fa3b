// A run's files served to the page: logs, outputs, plots, code.

package web

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path"
	"strings"

	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// getFile serves a file of a node: nodes/<id>/logs/..., nodes/<id>/outputs/...
// or its prompt log, nodes/<id>/prompts.md (prompt_logs/<id>/*.md in runs
// written before), or of the run's paper (paper/...: the PDF as a
// download), read through the run directory as a root (a
// link cannot lead out of it). Text is redacted; pictures are served as
// they are, under a policy that runs no script in them.
func (s *Server) getFile(w http.ResponseWriter, r *http.Request) {
	ref, err := s.find(r.Context(), r.PathValue("run"))
	if err != nil {
		s.failRun(w, err)
		return
	}
	if ref.archived() {
		s.fail(w, http.StatusNotFound, fmt.Errorf("run %s: its directory is not on this server", ref.id))
		return
	}
	dir := ref.dir
	rel := r.PathValue("path")
	if !servable(rel) {
		s.fail(w, http.StatusNotFound, fmt.Errorf("not a file of a node: %q", rel))
		return
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		code := http.StatusNotFound
		if !errors.Is(err, fs.ErrNotExist) {
			code = http.StatusForbidden
		}
		s.fail(w, code, fmt.Errorf("%s: %w", rel, errors.Unwrap(err)))
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		s.fail(w, http.StatusNotFound, fmt.Errorf("%s is not a file", rel))
		return
	}
	if fi.Size() > maxServedFile {
		s.fail(w, http.StatusRequestEntityTooLarge, fmt.Errorf("%s is %d bytes: read it in the run directory", rel, fi.Size()))
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; sandbox")
	if strings.EqualFold(path.Ext(rel), ".pdf") {
		// The model's PDF is downloaded, not shown in the page: a PDF may
		// carry script, and a sandboxed page shows none (its pages are the
		// PNGs the page shows).
		h.Set("Content-Type", "application/pdf")
		h.Set("Content-Disposition", `attachment; filename="`+ref.id+`-`+path.Base(rel)+`"`)
		http.ServeContent(w, r, "", fi.ModTime(), f)
		return
	}
	if ct := pictureType(rel); ct != "" {
		h.Set("Content-Type", ct)
		http.ServeContent(w, r, "", fi.ModTime(), f)
		return
	}
	data := make([]byte, fi.Size())
	if _, err := f.ReadAt(data, 0); err != nil && fi.Size() > 0 {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte(s.redact.text(strings.ToValidUTF8(string(data), "\uFFFD"))))
}

// servable: a node's log or output, a prompt log, or a file of the run's
// paper.
func servable(rel string) bool {
	if rel != path.Clean(rel) || path.IsAbs(rel) || strings.HasPrefix(rel, "../") || strings.Contains(rel, "\\") {
		return false
	}
	parts := strings.Split(rel, "/")
	switch {
	case len(parts) >= 4 && parts[0] == rundir.NodesDir && (parts[2] == rundir.LogsDir || parts[2] == rundir.OutputsDir):
		return true
	case len(parts) == 3 && parts[0] == rundir.NodesDir && parts[2] == rundir.PromptsLog:
		return true
	case len(parts) == 3 && parts[0] == rundir.OldPromptLogs && strings.HasSuffix(parts[2], ".md"):
		return true
	case rundir.IsPaperFile(parts):
		return true
	}
	return false
}

func pictureType(name string) string {
	if strings.EqualFold(path.Ext(name), ".svg") {
		return "image/svg+xml"
	}
	return llm.ImageMIME(name)
}
