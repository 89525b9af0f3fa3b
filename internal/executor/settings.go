package executor

import (
	"context"
	"io"
	"log/slog"

	"github.com/hpcq/hpcq/internal/artifacts"
	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/schema"
)

// ConfigFrom is the executor configuration the task settings give (what a
// worker process and the in-process workers of local mode read alike), for
// workspaces and logs under runsDir.
func ConfigFrom(t config.Tasks, runsDir string) Config {
	return Config{RunsDir: runsDir, KillGrace: t.Grace, MaxOutputBytes: t.MaxOutput, Shell: t.Shell,
		ArtifactLimits: artifacts.Limits{PerFile: t.ArtifactFileMax, PerNode: t.ArtifactNodeMax},
		Sandbox:        SandboxConfig{Mode: t.Isolation.Mode, User: t.Isolation.User, Writable: t.Isolation.Writable, TmpMB: t.Isolation.TmpMB, UIDs: t.Isolation.UIDs},
		Pids:           t.Isolation.Pids, DiskMB: t.Isolation.DiskMB, FinishTimeout: t.FinishTimeout,
		Images: ImagesConfig{Dir: t.ImageCache, MaxMB: t.ImageCacheMB, ShareMB: t.LayerShareMB, Dirs: t.ImageDirs}, GPUMPS: t.GPUMPS}
}

// UseQueue makes the executor bring its tasks' files home through q: the
// artifacts object store for the logs, outputs and plots, the layers'
// object store for what nodes install in their containers, and the live
// log stream while phases run.
func (c *Config) UseQueue(ctx context.Context, q *queue.Queue) error {
	store, err := q.Artifacts(ctx)
	if err != nil {
		return err
	}
	c.ArtifactStore, c.ArtifactChunks = store, q.ArtifactChunks
	// Without them the worker runs on: a layer is then kept on this worker
	// only (the result says so), and a pushed image cannot be had.
	log := c.Images.Log
	if log == nil {
		log = slog.Default()
	}
	if c.Images.LayerStore, err = q.Layers(ctx); err != nil {
		log.Warn("container layers are not shared with other workers: their object store cannot be opened", "err", err)
	}
	if c.Images.ImageStore, err = q.Images(ctx); err != nil {
		log.Warn("images pushed into the object store cannot be run: it cannot be opened", "err", err)
	}
	c.LiveLog = func(t *schema.NodeTask, phase string) io.WriteCloser {
		return q.LogWriter(t.RunID, t.NodeID, t.Attempt, phase)
	}
	return nil
}
