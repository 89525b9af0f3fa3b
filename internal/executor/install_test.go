package executor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/schema"
)

func installTask(node string) *schema.NodeTask {
	return &schema.NodeTask{V: 1, RunID: "r1", NodeID: node, Attempt: 1, Pool: "cpu",
		Install: &schema.Install{Goal: "make tool.sh available", MaxSteps: 5},
		Artifacts: schema.Artifacts{
			Run: schema.RunPhase{Commands: []string{"bash tool.sh"}},
		}}
}

// TestIterativeDownload: the installer's commands run one at a time in the
// workspace; a failing one is reported back, not the end of the phase.
func TestIterativeDownload(t *testing.T) {
	e := newExec(t)
	var seen []int
	e.cfg.Installer = func(ctx context.Context, task *schema.NodeTask, run func(context.Context, string) (int, string, error)) error {
		for _, c := range []string{"test -f tool.sh", "echo 'echo METRIC ok=1' > tool.sh", "test -f tool.sh"} {
			code, out, err := run(ctx, c)
			if err != nil {
				return err
			}
			seen = append(seen, code)
			_ = out
		}
		return nil
	}
	task := installTask("it1")
	res, err := e.Execute(context.Background(), task, worker.Slot{Cores: 1})
	require.NoError(t, err)
	require.Nil(t, res.Error, "%+v", res.Error)
	require.Equal(t, []int{1, 0, 0}, seen, "the failing check was reported to the installer")
	require.Equal(t, "download", res.Phases[1].Name)
	require.True(t, res.Phases[1].OK)
	require.Equal(t, 1.0, res.Metrics["ok"])
	log, err := os.ReadFile(filepath.Join(e.LogDir(task), "download.log"))
	require.NoError(t, err)
	require.Contains(t, string(log), "$ test -f tool.sh\n")
	require.Contains(t, string(log), "iterative install done after 3 commands")
}

func TestIterativeDownloadFailures(t *testing.T) {
	e := newExec(t)
	// No installer: the phase fails and says why.
	res, err := e.Execute(context.Background(), installTask("it2"), worker.Slot{Cores: 1})
	require.NoError(t, err)
	require.NotNil(t, res.Error)
	require.Equal(t, schema.PhaseDownload, res.Error.Phase)
	require.Equal(t, schema.ErrKindInstallFailed, res.Error.Kind)
	require.Contains(t, res.Error.Message, "LLM gateway")

	// The installer gives up: the phase fails with its reason.
	e.cfg.Installer = func(ctx context.Context, task *schema.NodeTask, run func(context.Context, string) (int, string, error)) error {
		if _, _, err := run(ctx, "false"); err != nil {
			return err
		}
		return errors.New("5 commands run and not done")
	}
	res, err = e.Execute(context.Background(), installTask("it3"), worker.Slot{Cores: 1})
	require.NoError(t, err)
	require.NotNil(t, res.Error)
	require.Contains(t, res.Error.Message, "iterative install failed after 1 commands: 5 commands run and not done")
	require.False(t, res.Phases[1].OK)

	// The phase timeout bounds the whole loop.
	task := installTask("it4")
	task.Limits.DownloadTimeoutS = 1
	e.cfg.Installer = func(ctx context.Context, task *schema.NodeTask, run func(context.Context, string) (int, string, error)) error {
		for {
			if _, _, err := run(ctx, "sleep 0.3"); err != nil {
				return err
			}
		}
	}
	start := time.Now()
	res, err = e.Execute(context.Background(), task, worker.Slot{Cores: 1})
	require.NoError(t, err)
	require.NotNil(t, res.Error)
	require.Contains(t, res.Error.Message, "timeout")
	require.Less(t, time.Since(start), 10*time.Second)
}
