package stores

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/journal"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/memory/cluster"
	"github.com/hpcq/hpcq/pkg/results"
)

// A worker's spools in its spool directory: what it wrote that the
// servers have not taken yet.
//
//	worker-<id>.lock               held (flock) by the worker while it runs
//	results-worker-<id>.journal    results rows not yet in ClickHouse
//	memory-<id>/spool-<run>.journal memory writes not yet in Redis and ClickHouse
//	purged/<id>-spool-<run>.journal  a memory spool of a run whose memory
//	                                 left Redis before it was replayed (set aside)
const (
	spoolLockPrefix    = "worker-"
	spoolLockSuffix    = ".lock"
	resultsSpoolPrefix = "results-worker-"
	memorySpoolPrefix  = "memory-"
)

// ErrSpoolsHeld: another running process holds the worker id's spools.
var ErrSpoolsHeld = errors.New("stores: the spools of this worker id are held by another process")

// SpoolName is the id as spool file names use it (no path separators).
func SpoolName(id string) string { return strings.NewReplacer("/", "_", "\\", "_").Replace(id) }

// MemorySpoolDir is where the worker id keeps its memory spools.
func MemorySpoolDir(spoolDir, id string) string {
	return filepath.Join(spoolDir, memorySpoolPrefix+SpoolName(id))
}

// ResultsSpoolName is the results sink's name of the worker id
// (results.ClickHouseOptions.Name).
func ResultsSpoolName(id string) string { return "worker-" + SpoolName(id) }

// HoldSpools takes the worker id's lock in spoolDir, held until release
// (or the process's end): while it is held no other worker adopts the
// id's spools, and a second worker with the same id on the same spool
// directory fails at start with ErrSpoolsHeld. Keep release reachable
// until the end (defer it): the lock is an open file, which the garbage
// collector would close.
func HoldSpools(spoolDir, id string) (release func() error, err error) {
	if err := os.MkdirAll(spoolDir, 0o755); err != nil {
		return nil, fmt.Errorf("stores: spool directory: %w", err)
	}
	f, err := journal.Lock(filepath.Join(spoolDir, spoolLockPrefix+SpoolName(id)+spoolLockSuffix))
	if errors.Is(err, journal.ErrLocked) {
		return nil, fmt.Errorf("%w: worker id %q in %s (give each worker its own id, or its own HPCQ_SPOOL_DIR)", ErrSpoolsHeld, id, spoolDir)
	}
	if err != nil {
		return nil, err
	}
	return f.Close, nil
}

// AdoptSpools ships what workers that died left in spoolDir: the spools
// of every worker id but self whose lock no process holds (a worker
// killed with its host, a job ended by Slurm; its successor has another
// id). Each spool is opened, which replays it to the servers (replays are
// idempotent: what reached a server before is not written twice), and
// closed after its close timeout; what the servers could not take stays
// for the next worker's start. A spool fully shipped is removed with its
// lock file; a memory spool of a run whose memory has left Redis is set
// aside in PurgedSpoolsDir. It returns the ids it adopted from; the error
// joins what could not be done, and nothing is lost by it.
func AdoptSpools(ctx context.Context, s config.Store, spoolDir, self string, log *slog.Logger) ([]string, error) {
	if s.ClickHouseDSN == "" {
		return nil, nil // no server spools without ClickHouse
	}
	ids, err := spoolOwners(spoolDir)
	if err != nil {
		return nil, err
	}
	var adopted []string
	var errs []error
	for _, id := range ids {
		if id == SpoolName(self) {
			continue
		}
		release, err := HoldSpools(spoolDir, id)
		if errors.Is(err, ErrSpoolsHeld) {
			continue // its worker runs
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		left, err := adoptSpools(ctx, s, spoolDir, id, log)
		if err != nil {
			errs = append(errs, fmt.Errorf("spools of worker %s: %w", id, err))
		}
		if left == 0 && err == nil {
			_ = os.Remove(filepath.Join(spoolDir, spoolLockPrefix+id+spoolLockSuffix))
		}
		_ = release()
		adopted = append(adopted, id)
		log.Info("spools of a worker that is gone shipped", "worker", id, "left", left, "err", err)
	}
	return adopted, errors.Join(errs...)
}

// spoolOwners are the ids (as in file names) with a spool in spoolDir.
func spoolOwners(spoolDir string) ([]string, error) {
	entries, err := os.ReadDir(spoolDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stores: spool directory: %w", err)
	}
	seen := map[string]bool{}
	var ids []string
	for _, e := range entries {
		name := e.Name()
		var id string
		switch {
		case e.IsDir() && strings.HasPrefix(name, memorySpoolPrefix):
			id = strings.TrimPrefix(name, memorySpoolPrefix)
		case !e.IsDir() && strings.HasPrefix(name, resultsSpoolPrefix) && strings.HasSuffix(name, ".journal"):
			id = strings.TrimSuffix(strings.TrimPrefix(name, resultsSpoolPrefix), ".journal")
		}
		if id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// adoptSpools replays the spools of id (whose lock the caller holds) and
// returns how many are left not empty.
func adoptSpools(ctx context.Context, s config.Store, spoolDir, id string, log *slog.Logger) (left int, err error) {
	var errs []error
	log = log.With("adopted_from", id)
	// replay opens the spool at path (which replays it) and closes it; an
	// empty spool is removed, one left not empty is counted. open returns
	// no store when it dealt with the spool otherwise (setAside).
	replay := func(path string, open func() (interface{ Close() error }, error)) {
		if nonEmpty(path) {
			st, err := open()
			if err == nil && st != nil {
				err = st.Close()
			}
			errs = append(errs, err)
		}
		if nonEmpty(path) {
			left++
		} else {
			_ = os.Remove(path)
		}
	}
	name := ResultsSpoolName(id)
	replay(results.SpoolFile(spoolDir, name), func() (interface{ Close() error }, error) {
		return results.OpenClickHouse(ctx, results.ClickHouseOptions{DSN: s.ClickHouseDSN, SpoolDir: spoolDir, Name: name, Logger: log})
	})
	dir := MemorySpoolDir(spoolDir, id)
	journals, _ := filepath.Glob(cluster.SpoolFile(dir, "*"))
	for _, path := range journals {
		run := spoolRun(path)
		replay(path, func() (interface{ Close() error }, error) {
			if s.RedisURL == "" {
				return nil, fmt.Errorf("%s: memory writes spooled but no HPCQ_REDIS_URL to replay them to", path)
			}
			st, err := cluster.Open(ctx, cluster.Options{Run: run, RedisURL: s.RedisURL, RedisPassword: s.RedisPassword,
				RedisTLSCA: s.RedisTLSCA, ClickHouseDSN: s.ClickHouseDSN, SpoolDir: dir, Logger: log})
			if errors.Is(err, cluster.ErrPurged) {
				return nil, setAside(spoolDir, id, path, err, log)
			}
			return st, err
		})
	}
	_ = os.Remove(dir) // only when empty
	return left, errors.Join(errs...)
}

// ShipOwnSpools ships the memory writes worker self's spools in spoolDir
// still hold from before this start (spooled while a server was away, of
// runs it has not opened since), through rw, the worker's recall writer
// over MemorySpoolDir(spoolDir, self): each such run's store is opened and
// closed (RecallWriter.Ship). A worker restarted with the same id would
// otherwise keep them until its next task of the run, which may never
// come; another worker adopts only a dead worker's spools (AdoptSpools).
// A spool of a run whose memory left Redis is set aside, as AdoptSpools
// does. What the servers do not take stays for the next start; the error
// joins what could not be done.
func ShipOwnSpools(ctx context.Context, rw *memory.RecallWriter, spoolDir, self string, log *slog.Logger) error {
	journals, err := filepath.Glob(cluster.SpoolFile(MemorySpoolDir(spoolDir, self), "*"))
	if err != nil {
		return fmt.Errorf("stores: memory spools: %w", err)
	}
	var errs []error
	for _, path := range journals {
		if !nonEmpty(path) {
			continue
		}
		switch err := rw.Ship(ctx, spoolRun(path)); {
		case errors.Is(err, cluster.ErrPurged):
			errs = append(errs, setAside(spoolDir, SpoolName(self), path, err, log)) // names path
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
		}
	}
	return errors.Join(errs...)
}

// ShipOwnSpoolsUntilDone runs ShipOwnSpools until it succeeds or ctx
// ends, logging each failure and waiting retry after the first, twice as
// long after each next one, at most maxShipWait: a worker started while
// a server is away ships its leftovers once the server is back.
func ShipOwnSpoolsUntilDone(ctx context.Context, rw *memory.RecallWriter, spoolDir, self string, retry time.Duration, log *slog.Logger) error {
	for {
		err := ShipOwnSpools(ctx, rw, spoolDir, self, log)
		if err == nil || ctx.Err() != nil {
			return err
		}
		log.Warn("memory writes spooled before this start: not all shipped; trying again", "in", retry, "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(retry):
		}
		retry = min(2*retry, maxShipWait)
	}
}

// maxShipWait bounds ShipOwnSpoolsUntilDone's wait between tries.
const maxShipWait = 5 * time.Minute

// spoolRun is the run of the memory spool at path.
func spoolRun(path string) string {
	return strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "spool-"), ".journal")
}

// PurgedSpoolsDir is where AdoptSpools and ShipOwnSpools keep the memory
// spools of runs whose memory was moved out of Redis (scheduler purge
// --memory) before they were replayed:
// <spoolDir>/purged/<worker>-spool-<run>.journal.
const PurgedSpoolsDir = "purged"

// setAside moves the memory spool at path, of a run whose memory left
// Redis (purged: cluster.Open's error), out of the spools workers replay,
// into PurgedSpoolsDir: its writes can no longer be applied, and each
// worker's start would otherwise try again. It is kept, not removed: the
// writes are the worker's last ones of the run, which the moved copy lacks.
func setAside(spoolDir, id, path string, purged error, log *slog.Logger) error {
	dst := filepath.Join(spoolDir, PurgedSpoolsDir, id+"-"+filepath.Base(path))
	err := os.MkdirAll(filepath.Dir(dst), 0o755)
	if err == nil {
		err = os.Rename(path, dst)
	}
	if err != nil {
		return fmt.Errorf("%s: %w; and setting it aside: %w", path, purged, err)
	}
	log.Warn("memory writes spooled by a worker were not replayed: the run's memory was moved out of Redis before; the spool is kept aside",
		"worker", id, "kept", dst, "reason", purged.Error())
	return nil
}

func nonEmpty(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Size() > 0
}
