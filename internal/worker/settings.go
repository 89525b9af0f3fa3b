package worker

import "github.com/hpcq/hpcq/internal/config"

// ConfigFrom is the worker configuration the task settings give; the caller
// adds what it knows of the machine (cores, toolchains, Slurm) and its
// identity.
func ConfigFrom(t config.Tasks, pools []string) Config {
	return Config{Pools: pools, Slots: t.Slots, FetchWait: t.FetchMax, IdleExit: t.IdleExit, NodeExclusive: t.NodeExclusive}
}
