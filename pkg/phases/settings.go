package phases

import (
	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/pkg/artifacts"
)

// ConfigFrom is the executor configuration the task settings give (what a
// worker process and the in-process workers of local mode read alike), for
// workspaces and logs under runsDir.
func ConfigFrom(t config.Tasks, runsDir string) Config {
	return Config{RunsDir: runsDir, KillGrace: t.Grace, MaxOutputBytes: t.MaxOutput, Shell: t.Shell,
		ArtifactLimits: artifacts.Limits{PerFile: t.ArtifactFileMax, PerNode: t.ArtifactNodeMax},
		Sandbox:        SandboxConfig{Mode: t.Isolation.Mode, User: t.Isolation.User, Writable: t.Isolation.Writable}}
}
