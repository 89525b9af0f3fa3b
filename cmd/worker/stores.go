package main

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/hpcq/hpcq/internal/assemble"
	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/stores"
	"github.com/hpcq/hpcq/pkg/results"
)

// workerStores opens what the worker writes to: recall events to the
// node's branch in Redis as each phase happens (without the memory servers
// they go back with the result), and with ClickHouse the attempt rows of
// every task, spooled while it is away. The function returned closes them,
// whatever the error.
func workerStores(ctx context.Context, cfg *config.Worker, id string, p *assemble.Params, log *slog.Logger) (func(), error) {
	var closers []func()
	closeAll := func() {
		for _, c := range slices.Backward(closers) {
			c()
		}
	}
	if cfg.Store.ClickHouseDSN != "" {
		// This worker's spools are its own while it runs; those of workers
		// that died here (a killed host, a job Slurm ended) are shipped.
		release, err := stores.HoldSpools(cfg.Store.SpoolDir, id)
		if err != nil {
			return closeAll, err
		}
		closers = append(closers, func() {
			if err := release(); err != nil {
				log.Warn("spools: not released", "err", err)
			}
		})
		go func() {
			if _, err := stores.AdoptSpools(ctx, cfg.Store, cfg.Store.SpoolDir, id, log); err != nil {
				log.Warn("spools of workers that are gone: not all shipped (the next worker's start tries again)", "err", err)
			}
		}()
	}
	if rw := stores.RecallWriter(cfg.Store, stores.MemorySpoolDir(cfg.Store.SpoolDir, id), log); rw != nil {
		p.Executor.Recall = rw
		closers = append(closers, func() {
			if err := rw.Close(); err != nil {
				log.Error("memory", "err", err)
			}
		})
		// What this worker id spooled before it stopped, of runs it may not
		// see again.
		go func() { _ = stores.ShipOwnSpoolsUntilDone(ctx, rw, cfg.Store.SpoolDir, id, 10*time.Second, log) }()
	} else {
		log.Info("no HPCQ_REDIS_URL and HPCQ_CLICKHOUSE_DSN: nodes' recall events go to the scheduler with their results")
	}
	if cfg.Store.ClickHouseDSN != "" {
		sink, err := results.OpenClickHouse(ctx, results.ClickHouseOptions{DSN: cfg.Store.ClickHouseDSN,
			SpoolDir: cfg.Store.SpoolDir, Name: stores.ResultsSpoolName(id), Logger: log})
		if err != nil {
			return closeAll, err
		}
		closers = append(closers, func() {
			if err := sink.Close(); err != nil {
				log.Error("results", "err", err)
			}
		})
		p.Worker.Results = sink
	}
	return closeAll, nil
}
