// A node's files: its directory, JSON read and written whole.

package engine

import (
	"errors"
	"io/fs"
	"os"
)

// endedFromCache says whether node id was answered from the result cache:
// known for the nodes this process ended, read from result.json for those
// ended before it started (a resumed run).
func (e *engine) endedFromCache(id string) bool {
	if v, ok := e.own.Load(id); ok && v.(ownNode).ended {
		return v.(ownNode).cached
	}
	o, ok, _ := e.files.outcome(id)
	return ok && o.Cached
}

// makeNodeDir makes a node's directory; fresh says that this call made it
// (so the node has no files yet), not an earlier run of the node.
func makeNodeDir(dir string) (fresh bool, err error) {
	err = os.Mkdir(dir, 0o755)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrExist):
		return false, nil
	case errors.Is(err, fs.ErrNotExist):
		// nodes/ itself is missing (made at start: removed since?).
		return false, os.MkdirAll(dir, 0o755)
	}
	return false, err
}

// isUnwritten says that node id is one whose files this process makes
// and whose outcome it has not saved yet.
func (e *engine) isUnwritten(id string) bool {
	v, ok := e.own.Load(id)
	return ok && !v.(ownNode).ended
}
