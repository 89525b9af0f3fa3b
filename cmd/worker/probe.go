package main

import (
	"context"
	"encoding/json"
	"os"

	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/executor"
)

// probe prints what the worker would register, as JSON: the toolchains and
// GPUs found in its environment, the GPU ids its slots would be given and
// whether tasks sharing a GPU would use MPS. It needs no server.
func probe(ctx context.Context, cfg *config.Worker) error {
	env, err := executor.WorkerEnv(ctx, cfg.Shell)
	if err != nil {
		return err
	}
	tc := executor.DetectToolchains(ctx, env, cfg.Shell == executor.ShellLogin, nil)
	mps, err := executor.MPSPipe(cfg.GPUMPS)
	if err != nil {
		return err
	}
	e := json.NewEncoder(os.Stdout)
	e.SetIndent("", "  ")
	return e.Encode(map[string]any{"toolchains": tc.Versions, "gpus": tc.GPUs, "notes": tc.Notes,
		"gpu_ids": executor.GPUIDs(tc, os.Getenv("CUDA_VISIBLE_DEVICES")), "mps_pipe": mps})
}
