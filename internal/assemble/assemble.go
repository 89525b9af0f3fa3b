// Package assemble builds what a worker runs tasks with: the login
// environment captured once, the toolchains and GPUs found in it, the
// executor (the sandbox, the phases, the installer through the LLM gateway)
// and the worker's configuration completed from them. A worker process
// (cmd/worker) and local mode's in-process workers (internal/local) are
// built here alike; each then starts its workers with worker.New.
package assemble

import (
	"context"
	"log/slog"
	"os"

	"github.com/hpcq/hpcq/internal/executor"
	"github.com/hpcq/hpcq/internal/hostbound"
	"github.com/hpcq/hpcq/internal/prompt"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/queue"
)

// Params are a worker's settings before what only its machine can say.
type Params struct {
	Queue *queue.Queue
	// Executor is the executor's configuration (executor.ConfigFrom). Env
	// nil: the login environment is captured here (its Shell).
	Executor executor.Config
	// Worker is the worker's configuration (worker.ConfigFrom). Toolchains
	// nil: detected in the environment; GPUIDs nil: the
	// GPUs found that CUDA_VISIBLE_DEVICES allows (a Slurm allocation sets
	// Cores and GPUIDs before).
	Worker worker.Config
	// Installer: the iterative installer asks the model through the LLM
	// gateway on the queue's connection (a worker holds no API key).
	Installer bool
	Logger    *slog.Logger
}

// Worker builds the executor and completes the worker's configuration.
func Worker(ctx context.Context, p Params) (*executor.Executor, worker.Config, error) {
	log := p.Logger
	if log == nil {
		log = slog.Default()
	}
	pc, wc := p.Executor, p.Worker
	if pc.Images.Log == nil {
		pc.Images.Log = log
	}
	if pc.Env == nil {
		env, err := executor.WorkerEnv(ctx, pc.Shell)
		if err != nil {
			return nil, wc, err
		}
		pc.Env = env
	}
	if wc.Toolchains == nil {
		tc := executor.DetectToolchains(ctx, pc.Env, pc.Shell == executor.ShellLogin, log)
		wc.Toolchains, wc.GPUDevices = tc.Versions, tc.GPUs
		if wc.GPUIDs == nil {
			wc.GPUIDs = executor.GPUIDs(tc, os.Getenv("CUDA_VISIBLE_DEVICES"))
		}
	}
	if wc.Bound == nil {
		wc.Bound = hostbound.Start(log)
	}
	if p.Installer && pc.Installer == nil {
		pc.Installer = prompt.NewInstaller(llm.Gateway{NC: p.Queue.Conn()})
	}
	if err := pc.UseQueue(ctx, p.Queue); err != nil {
		return nil, wc, err
	}
	exec, err := executor.NewExecutor(pc)
	if err != nil {
		return nil, wc, err
	}
	log.Info("task commands isolated", "isolation", exec.Isolation())
	if len(wc.Hosts) > 1 && wc.MultiNodeRefusal == "" {
		wc.MultiNodeRefusal = exec.MultiNodeRefusal()
	}
	if wc.Logger == nil {
		wc.Logger = log
	}
	return exec, wc, nil
}
