package schedcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/image"
	"github.com/hpcq/hpcq/internal/term"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/schema"
)

// ImageOptions configure Image.
type ImageOptions struct {
	// Action is "push" (Files into the object store) or "ls".
	Action string
	Files  []string
	Out    io.Writer
	Log    *slog.Logger
}

// Image pushes container image files into the cluster's object store, for
// workers without a shared file system (compute nodes that reach no
// registry), or lists those there. A pushed image is named
// "store:sha256:<hex>" in run.yaml or a task; each worker fetches it once
// and keeps it unpacked by digest.
func Image(ctx context.Context, cfg *config.Scheduler, o ImageOptions) error {
	if cfg.NATS.URL == "" {
		return errors.New("scheduler image: needs a cluster's NATS server (HPCQ_NATS_URL or --nats-url); a local run names the image's file in run.yaml")
	}
	if o.Out == nil {
		o.Out = term.Stdout()
	}
	q, err := queue.Dial(ctx, cfg.NATS.Conn("hpcq-image"), cfg.Queue.Options(), o.Log)
	if err != nil {
		return err
	}
	defer q.Close()
	store, err := q.Images(ctx)
	if err != nil {
		return err
	}
	switch o.Action {
	case "push":
		for _, f := range o.Files {
			if err := pushImage(ctx, store, f, o.Out); err != nil {
				return err
			}
		}
		return nil
	case "ls":
		return listImages(ctx, store, o.Out)
	}
	return fmt.Errorf("scheduler image: %q: push FILE... or ls", o.Action)
}

// pushImage puts one image file in the store, once per digest.
func pushImage(ctx context.Context, store jetstream.ObjectStore, path string, out io.Writer) error {
	kind, err := image.KindOf(path)
	if err != nil {
		return err
	}
	if kind == image.KindDir {
		return fmt.Errorf("%s is a directory: push a file of it (mksquashfs %s image.sqfs, or an OCI archive)", path, path)
	}
	digest, err := image.FileDigest(ctx, path)
	if err != nil {
		return err
	}
	ref := schema.StoredImagePrefix + digest
	name := queue.ImageObject(digest)
	if info, err := store.GetInfo(ctx, name); err == nil {
		fmt.Fprintf(out, "%s is there already (%s, %s, pushed %s): name it as image: %s\n", path, kind, mb(int64(info.Size)), info.ModTime.UTC().Format(time.RFC3339), ref)
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	start := time.Now()
	info, err := store.Put(ctx, jetstream.ObjectMeta{Name: name, Description: filepath.Base(path),
		Metadata: map[string]string{"kind": kind, "file": filepath.Base(path)}}, f)
	if err != nil {
		return fmt.Errorf("push %s: %w", path, err)
	}
	fmt.Fprintf(out, "pushed %s (%s, %s) in %s: name it as image: %s\n", path, kind, mb(int64(info.Size)), time.Since(start).Round(time.Millisecond), ref)
	return nil
}

func listImages(ctx context.Context, store jetstream.ObjectStore, out io.Writer) error {
	infos, err := store.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		fmt.Fprintf(out, "no images in the object store %s (scheduler image push FILE)\n", queue.ImagesBucket)
		return nil
	}
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "IMAGE\tKIND\tSIZE\tPUSHED\tFILE")
	for _, i := range infos {
		fmt.Fprintf(tw, "%ssha256:%s\t%s\t%s\t%s\t%s\n", schema.StoredImagePrefix, i.Name, i.Metadata["kind"], mb(int64(i.Size)),
			i.ModTime.UTC().Format(time.RFC3339), i.Metadata["file"])
	}
	return tw.Flush()
}

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/(1<<20)) }
