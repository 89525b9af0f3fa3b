package executor

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hpcq/hpcq/pkg/schema"
)

// An attempt in a container image writes over the image into a layer
// directory of its own (upper/ and work/, on disk beside its workspace):
// made before its sandbox starts, removed once its layer is kept. On a
// disk where a mkdir or an unlink costs a tenth of a millisecond the two
// were a quarter of a no-op container task's cost over the host's, so the
// directory is made while the workspace is written, and removed after the
// result, in the background.

// pendingLayer is an attempt's layer directory being made.
type pendingLayer struct {
	dir  string
	done chan struct{}
	err  error
	used atomic.Bool
}

// startLayerDir starts making t's layer directory (fresh: nothing of an
// earlier delivery of the attempt survives) when t runs in an image with
// hpcq's own runtime; nil otherwise.
func (e *Executor) startLayerDir(t *schema.NodeTask) *pendingLayer {
	if t.Container == nil || (t.Container.Runtime != "" && t.Container.Runtime != schema.RuntimeHPCQ) || e.sandbox == nil {
		return nil
	}
	p := &pendingLayer{dir: e.layerDir(t), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		if p.err = freshDir(p.dir); p.err != nil {
			return
		}
		for _, d := range []string{"upper", "work"} {
			if p.err = os.Mkdir(filepath.Join(p.dir, d), 0o755); p.err != nil {
				return
			}
		}
	}()
	return p
}

// take waits for the directory and gives it to the container that uses it.
func (p *pendingLayer) take() (string, error) {
	<-p.done
	p.used.Store(true)
	return p.dir, p.err
}

// release drops the directory when no container took it (the task ended
// before its sandbox: a refused image, a failed coding phase).
func (e *Executor) releaseLayerDir(p *pendingLayer) {
	if p == nil || p.used.Load() {
		return
	}
	<-p.done
	e.dropLayerDir(p.dir)
}

// trash is where layer directories wait to be removed: in the runs
// directory (the same file system, so a rename), hidden from tasks as the
// runs directory is.
const trash = ".trash"

// dropLayerDir moves dir out of its path at once and removes it in the
// background (a remover runs while there is something to remove; the
// directories of a worker that stopped first are removed by the next
// executor on these runs).
func (e *Executor) dropLayerDir(dir string) {
	gone := filepath.Join(e.cfg.RunsDir, trash, strconv.FormatInt(time.Now().UnixNano(), 36)+"-"+strconv.FormatUint(e.trash.seq.Add(1), 36))
	if err := os.MkdirAll(filepath.Dir(gone), 0o700); err == nil {
		if err = os.Rename(dir, gone); err == nil {
			e.trash.mu.Lock()
			e.trash.queue = append(e.trash.queue, gone)
			start := !e.trash.running
			e.trash.running = true
			e.trash.mu.Unlock()
			if start {
				go e.emptyTrash()
			}
			return
		}
	}
	if err := removeTree(dir); err != nil {
		e.cfg.Images.Log.Warn("a node's layer directory is left", "dir", dir, "err", err)
	}
}

// emptyTrash removes what an earlier executor left in the trash (once),
// then each directory dropped, until none is left.
func (e *Executor) emptyTrash() {
	e.trash.once.Do(func() {
		dir := filepath.Join(e.cfg.RunsDir, trash)
		old, _ := os.ReadDir(dir)
		for _, o := range old {
			_ = removeTree(filepath.Join(dir, o.Name()))
		}
	})
	for {
		e.trash.mu.Lock()
		if len(e.trash.queue) == 0 {
			e.trash.running = false
			e.trash.mu.Unlock()
			return
		}
		d := e.trash.queue[0]
		e.trash.queue = e.trash.queue[1:]
		e.trash.mu.Unlock()
		if err := removeTree(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			e.cfg.Images.Log.Warn("a node's layer directory is left", "dir", d, "err", err)
		}
	}
}

// trashState is the executor's part of the above.
type trashState struct {
	once    sync.Once
	mu      sync.Mutex
	queue   []string
	running bool
	seq     atomic.Uint64
}
