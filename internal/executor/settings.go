package executor

import (
	"context"
	"io"

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
		Images: ImagesConfig{Dir: t.ImageCache, MaxMB: t.ImageCacheMB, ShareMB: t.LayerShareMB}}
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
	if c.Images.LayerStore, err = q.Layers(ctx); err != nil {
		return err
	}
	if c.Images.ImageStore, err = q.Images(ctx); err != nil {
		return err
	}
	c.LiveLog = func(t *schema.NodeTask, phase string) io.WriteCloser {
		return q.LogWriter(t.RunID, t.NodeID, t.Attempt, phase)
	}
	return nil
}
