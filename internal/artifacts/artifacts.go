package artifacts

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hpcq/hpcq/internal/fileio"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// Limits cap what one task attempt uploads.
type Limits struct {
	// PerFile is the largest file uploaded; a log over it is cut to its
	// first PerFile bytes, an output or plot over it is left out. Defaults
	// to 16 MiB.
	PerFile int64
	// PerNode is the most bytes of one attempt; what does not fit is left
	// out. Defaults to 64 MiB.
	PerNode int64
}

func (l Limits) withDefaults() Limits {
	if l.PerFile <= 0 {
		l.PerFile = 16 << 20
	}
	if l.PerNode <= 0 {
		l.PerNode = 64 << 20
	}
	return l
}

// File is a file of an attempt to bring home.
type File struct {
	// Kind is schema.ArtifactLog, ArtifactOutput or ArtifactPlot.
	Kind string
	// Name under the node's logs/ or outputs/ directory.
	Name string
	// Dir and Rel locate the file on the worker: it is read through an
	// os.Root at Dir, so a symbolic link in a workspace cannot make the
	// worker upload a file from outside it.
	Dir, Rel string
}

// Uploader puts the files of task attempts in the artifacts object store.
type Uploader struct {
	Store jetstream.ObjectStore
	// Chunks, when set, says how many chunks the store holds under an
	// object's NUID (queue.Queue.ArtifactChunks): a put made again after a
	// failed try is checked with it.
	Chunks func(ctx context.Context, nuid string) (uint64, error)
	Limits Limits
}

// Upload stores files in order until the caps are reached and returns what
// it stored, and a note naming what it left out (empty when nothing was).
// A file that cannot be read is left out with the reason; an error of the
// object store ends the upload with an error (the result says so).
func (u *Uploader) Upload(ctx context.Context, t *schema.NodeTask, files []File) ([]schema.Artifact, string, error) {
	lim := u.Limits.withDefaults()
	var out []schema.Artifact
	var left []string
	var total int64
	seen := map[string]bool{}
	for _, f := range files {
		a := schema.Artifact{Kind: f.Kind, Name: f.Name}
		key := rundir.ArtifactDir(a) + "/" + a.Name
		if seen[key] {
			continue
		}
		seen[key] = true
		if err := schema.CheckArtifactName(f.Name); err != nil {
			left = append(left, fmt.Sprintf("%s: %v", key, err))
			continue
		}
		if len(out) == schema.MaxArtifacts {
			left = append(left, fmt.Sprintf("%s: more than %d files", key, schema.MaxArtifacts))
			continue
		}
		root, err := os.OpenRoot(f.Dir)
		if err != nil {
			left = append(left, fmt.Sprintf("%s: %v", key, err))
			continue
		}
		fi, err := root.Lstat(f.Rel)
		if err != nil {
			root.Close()
			left = append(left, fmt.Sprintf("%s: %v", key, err))
			continue
		}
		if !fi.Mode().IsRegular() {
			root.Close()
			left = append(left, key+": "+fileio.TypeName(fi.Mode())+", not a regular file")
			continue
		}
		size := fi.Size()
		if size > lim.PerFile {
			if f.Kind != schema.ArtifactLog {
				root.Close()
				left = append(left, fmt.Sprintf("%s: %s, over the %s per-file cap", key, human(size), human(lim.PerFile)))
				continue
			}
			left = append(left, fmt.Sprintf("%s: %s, only its first %s kept (per-file cap)", key, human(size), human(lim.PerFile)))
			size = lim.PerFile
		}
		if total+size > lim.PerNode {
			root.Close()
			left = append(left, fmt.Sprintf("%s: %s, over the %s per-node cap", key, human(size), human(lim.PerNode)))
			continue
		}
		n, sum, err := u.put(ctx, queue.ArtifactObject(t.RunID, t.NodeID, t.Attempt, rundir.ArtifactDir(a), a.Name), root, f.Rel, size)
		root.Close()
		if errors.Is(err, errLocal) {
			left = append(left, fmt.Sprintf("%s: %v", key, err))
			continue
		}
		if err != nil {
			return out, strings.Join(left, "; "), fmt.Errorf("artifacts: upload %s of node %s: %w", key, t.NodeID, err)
		}
		a.Bytes, a.SHA256 = n, sum
		total += n
		out = append(out, a)
	}
	return out, strings.Join(left, "; "), nil
}

// errLocal marks a failure to read the worker's file, as opposed to one of
// the object store.
var errLocal = errors.New("unreadable")

// putAttempts bounds the tries of one upload or download. An object
// store put whose acknowledgements are lost (its stream's leader died on a
// NATS cluster) never returns on its own, nor does a get whose chunks stop
// coming; each try has a deadline from the file's size (putBase plus
// putRate), and a try that runs out is made again, as is one the stream
// did not answer while it elects a leader (after a pause).
const (
	putAttempts = 5
	putBase     = 20 * time.Second
	putRate     = 1 << 20 // bytes per second at the least
)

// retry runs f, a transfer of size bytes, until it succeeds, up to
// putAttempts tries; again says which errors are worth another try.
func retry(ctx context.Context, size int64, again func(error) bool, f func(ctx context.Context, try int) error) error {
	for try := 1; ; try++ {
		tctx, cancel := context.WithTimeout(ctx, putBase+time.Duration(size/putRate)*time.Second)
		err := f(tctx, try)
		cancel()
		if err == nil || try == putAttempts || ctx.Err() != nil || !again(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(try) * time.Second):
		}
	}
}

// put uploads the first size bytes of the file rel of root as name. A put
// that succeeds after a try that did not is checked (verify): the earlier
// try's chunks and metadata, sent while the stream changed leaders, may
// have been stored in part, or after the later try's, leaving an object
// that cannot be read whole; it is put again.
func (u *Uploader) put(ctx context.Context, name string, root *os.Root, rel string, size int64) (n int64, sum string, err error) {
	err = retry(ctx, size, func(err error) bool { return queue.Transient(err) || errors.Is(err, errReadBack) }, func(ctx context.Context, try int) error {
		n, sum, err = u.putOnce(ctx, name, root, rel, size)
		if err == nil && try > 1 {
			err = u.verify(ctx, name, n, sum)
		}
		return err
	})
	return n, sum, err
}

// errReadBack: an object looked at after a put is not what was put.
var errReadBack = errors.New("artifacts: object in the store differs from the file")

// verify checks the object name as the store holds it: its metadata's
// size and digest are the file's, and (with Chunks) the stream holds every
// chunk the metadata names. It reads no chunk: a worker's NATS user need
// not read the store.
func (u *Uploader) verify(ctx context.Context, name string, n int64, sum string) error {
	info, err := u.Store.GetInfo(ctx, name)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", errReadBack, name, err)
	}
	raw, err := hex.DecodeString(sum)
	if err != nil {
		return err
	}
	if info.Size != uint64(n) || info.Digest != "SHA-256="+base64.URLEncoding.EncodeToString(raw) {
		return fmt.Errorf("%w: %s: %d bytes, digest %s in the store; %d bytes put", errReadBack, name, info.Size, info.Digest, n)
	}
	if u.Chunks == nil {
		return nil
	}
	have, err := u.Chunks(ctx, info.NUID)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", errReadBack, name, err)
	}
	if have != uint64(info.Chunks) {
		return fmt.Errorf("%w: %s: %d of its %d chunks in the store", errReadBack, name, have, info.Chunks)
	}
	return nil
}

func (u *Uploader) putOnce(ctx context.Context, name string, root *os.Root, rel string, size int64) (int64, string, error) {
	// Not followed, never blocking, regular only: a program's leftovers
	// (a named pipe where a plot was) cannot hold the worker's slot.
	f, _, err := fileio.OpenRegular(root, rel)
	if err != nil {
		return 0, "", fmt.Errorf("%w: %v", errLocal, err)
	}
	defer f.Close()
	h := sha256.New()
	r := &countingReader{r: io.TeeReader(io.LimitReader(f, size), h)}
	if _, err := u.Store.Put(ctx, jetstream.ObjectMeta{Name: name}, r); err != nil {
		if r.err != nil {
			return 0, "", fmt.Errorf("%w: %v", errLocal, r.err)
		}
		return 0, "", err
	}
	return r.n, hex.EncodeToString(h.Sum(nil)), nil
}

type countingReader struct {
	r   io.Reader
	n   int64
	err error
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF {
		c.err = err
	}
	return n, err
}

// Fetch writes the artifacts of res into the run directory runDir
// (rundir.NodeFile(node, rundir.ArtifactDir(a), a.Name)), checking every file's size and SHA-256 against the result.
// Files already there with the right digest are not fetched again. A missing
// or corrupt object is an error naming the node and the file; the other
// files are still fetched, and a corrupt file is not left in place.
func Fetch(ctx context.Context, store jetstream.ObjectStore, runDir string, res *schema.NodeResult) error {
	if len(res.Artifacts) == 0 {
		return nil
	}
	dir := rundir.Dir(runDir).Path(rundir.NodeFile(res.NodeID))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("artifacts of node %s: %w", res.NodeID, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("artifacts of node %s: %w", res.NodeID, err)
	}
	defer root.Close()
	var errs []error
	for _, a := range res.Artifacts {
		if err := fetchOne(ctx, store, root, res, a); err != nil {
			errs = append(errs, fmt.Errorf("artifacts of node %s (attempt %d): %s/%s: %w", res.NodeID, res.Attempt, rundir.ArtifactDir(a), a.Name, err))
		}
	}
	return errors.Join(errs...)
}

// ErrCorrupt is wrapped when an object's size or digest is not the one the
// result lists.
var ErrCorrupt = errors.New("corrupt artifact")

func fetchOne(ctx context.Context, store jetstream.ObjectStore, root *os.Root, res *schema.NodeResult, a schema.Artifact) error {
	if err := schema.CheckArtifactName(a.Name); err != nil {
		return err
	}
	rel := path.Join(rundir.ArtifactDir(a), a.Name)
	if sum, err := fileSum(root, rel); err == nil && sum == a.SHA256 {
		return nil
	}
	if err := root.MkdirAll(path.Dir(rel), 0o755); err != nil {
		return err
	}
	// A get made while the stream elects a leader can stop getting chunks
	// and wait forever: each try has its deadline, and is made again.
	return retry(ctx, a.Bytes, queue.Transient, func(ctx context.Context, _ int) error {
		return getOnce(ctx, store, root, res, a, rel)
	})
}

// getOnce gets one artifact into rel, through rel.part.
func getOnce(ctx context.Context, store jetstream.ObjectStore, root *os.Root, res *schema.NodeResult, a schema.Artifact, rel string) error {
	obj, err := store.Get(ctx, queue.ArtifactObject(res.RunID, res.NodeID, res.Attempt, rundir.ArtifactDir(a), a.Name))
	if err != nil {
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return fmt.Errorf("not in the object store (older than HPCQ_ARTIFACTS_MAX_AGE, or purged): %w", err)
		}
		return err
	}
	defer obj.Close()
	tmp := rel + ".part"
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(obj, a.Bytes+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = check(n, h, a)
	}
	if err != nil {
		_ = root.Remove(tmp)
		if ctx.Err() != nil && !queue.Transient(err) {
			err = fmt.Errorf("%w: %w", ctx.Err(), err) // the try's deadline cut the copy
		}
		return err
	}
	return root.Rename(tmp, rel)
}

func check(n int64, h hash.Hash, a schema.Artifact) error {
	if n != a.Bytes {
		return fmt.Errorf("%w: %d bytes, the result says %d", ErrCorrupt, n, a.Bytes)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != a.SHA256 {
		return fmt.Errorf("%w: sha256 %s, the result says %s", ErrCorrupt, sum, a.SHA256)
	}
	return nil
}

func fileSum(root *os.Root, rel string) (string, error) {
	f, err := root.Open(rel)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Purge deletes every object of run from the store and returns how many.
func Purge(ctx context.Context, store jetstream.ObjectStore, run string) (int, error) {
	n, _, err := DeleteObjects(ctx, store, func(name string) bool { return strings.HasPrefix(name, run+"/") })
	return n, err
}

// DeleteObjects deletes the objects of store for whose name which is true:
// how many, and their bytes. An object already gone counts as deleted.
func DeleteObjects(ctx context.Context, store jetstream.ObjectStore, which func(name string) bool) (n int, size uint64, err error) {
	list, err := store.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("artifacts: list: %w", err)
	}
	for _, o := range list {
		if !which(o.Name) {
			continue
		}
		if err := store.Delete(ctx, o.Name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			return n, size, fmt.Errorf("artifacts: delete %s: %w", o.Name, err)
		}
		n++
		size += o.Size
	}
	return n, size, nil
}

func human(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
