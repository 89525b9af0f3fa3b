// Command memory is the memory benchmark behind `make bench-memory`: it
// replays one trace (../shared/bench/memory-trace-<base|10x>.jsonl.gz)
// against a fresh SQLite store and prints, exactly:
//
//	bench-memory trace=<t> store=sqlite op=<op> n=<int> ops_per_s=<f> p50_ms=<f> p95_ms=<f> p99_ms=<f>
//	bench-memory trace=<t> store=sqlite export=<ok|failed> db_bytes=<int> peak_rss_mb=<f> renders_at_budget=<int> renders_with_archival=<int> search_zero_hits=<int>
//
// ops_per_s = n / the sum of the per-op wall times, each op timed alone
// around the API call. Details (phase times, row counts) go to stderr.
// -archival N and -repeats N run the synthetic benchmarks of archival.go
// instead (bench-archival and bench-repeats lines); -store redis+clickhouse
// runs any of them on the cluster store.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	benchtrace "github.com/hpcq/hpcq/bench/trace"
	"github.com/hpcq/hpcq/internal/benchutil"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/memory/cluster"
	"github.com/hpcq/hpcq/pkg/memory/sqlite"
)

type op = benchtrace.Op

var order = []string{"fork", "core_set", "recall_append", "archival_write", "render", "archival_search"}

func main() {
	trace := flag.String("trace", "base", "base or 10x")
	storeName := flag.String("store", "sqlite", "sqlite, or redis+clickhouse (HPCQ_REDIS_URL, HPCQ_CLICKHOUSE_DSN)")
	archival := flag.Int("archival", 0, "instead of a trace: load this many synthetic archival texts and time searches (bench-archival)")
	repeats := flag.Int("repeats", 0, "instead of a trace: this many siblings writing the same lesson, then searches for it (bench-repeats)")
	dir := flag.String("dir", "../shared/bench", "directory of the trace files")
	prof := flag.String("cpuprofile", "", "write a CPU profile of the replay to this file")
	flag.Parse()
	stop, err := benchutil.CPUProfile(*prof)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-memory:", err)
		os.Exit(1)
	}
	defer stop()
	switch {
	case *archival > 0:
		err = runArchival(*storeName, *archival, os.Stdout, os.Stderr)
	case *repeats > 0:
		err = runRepeats(*storeName, *repeats, os.Stdout, os.Stderr)
	default:
		err = run(*trace, *storeName, *dir, os.Stdout, os.Stderr)
	}
	if err != nil {
		stop()
		fmt.Fprintln(os.Stderr, "bench-memory:", err)
		os.Exit(1)
	}
}

// benchStore is the store under test, with what the report needs of it.
type benchStore struct {
	memory.Store
	// flush makes every acknowledged write durable where it belongs (the
	// final commit and checkpoint, or the last shipped batch).
	flush func(context.Context) error
	// size is the store's size in bytes once flushed.
	size func(context.Context) (int64, error)
}

func openStore(ctx context.Context, name, tmp string) (*benchStore, error) {
	switch name {
	case "sqlite":
		dbPath := filepath.Join(tmp, "memory.sqlite")
		s, err := sqlite.Open(dbPath, sqlite.Options{})
		if err != nil {
			return nil, err
		}
		return &benchStore{Store: s, flush: s.Checkpoint, size: func(context.Context) (int64, error) {
			fi, err := os.Stat(dbPath)
			if err != nil {
				return 0, err
			}
			return fi.Size(), nil
		}}, nil
	case "redis+clickhouse":
		run := fmt.Sprintf("bench-%d", time.Now().UnixNano())
		s, err := cluster.Open(ctx, cluster.Options{Run: run, RedisURL: os.Getenv("HPCQ_REDIS_URL"),
			ClickHouseDSN: os.Getenv("HPCQ_CLICKHOUSE_DSN"), SpoolDir: tmp,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			return nil, err
		}
		return &benchStore{Store: s, flush: s.Flush, size: s.Size}, nil
	}
	return nil, fmt.Errorf("unknown store %q (sqlite, redis+clickhouse)", name)
}

func run(trace, storeName, dir string, out, log io.Writer) error {
	ops, err := benchtrace.Read(dir, trace)
	if err != nil {
		return err
	}
	return withStore(storeName, func(ctx context.Context, store *benchStore, tmp string) error {
		return replay(ctx, store, tmp, trace, storeName, ops, out, log)
	})
}

// withStore runs fn on a fresh store in a temp dir, removed afterwards.
func withStore(storeName string, fn func(ctx context.Context, store *benchStore, tmp string) error) error {
	tmp, err := os.MkdirTemp("", "hpcq-bench-memory-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ctx := context.Background()
	store, err := openStore(ctx, storeName, tmp)
	if err != nil {
		return err
	}
	defer store.Close()
	return fn(ctx, store, tmp)
}

// replay runs the trace's ops against store and prints the report.
//
// Long: the replay of a recorded run's memory calls, step by step, as
// BENCHMARKS.md describes it.
func replay(ctx context.Context, store *benchStore, tmp, trace, storeName string, ops []op, out, log io.Writer) error {
	var err error
	m := memory.New(store, memory.Config{}, memory.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})

	lat := map[string][]time.Duration{}
	phase := map[string]time.Duration{}
	var atBudget, withArchival, zeroHits, renderChars, renderMax, hitsTotal int
	flushed := false
	for i, o := range ops {
		ph := "writes"
		switch o.Op {
		case "fork":
			ph = "forks"
		case "render", "archival_search":
			ph = "queries"
		}
		if ph == "queries" && !flushed {
			// Every write durable where the store keeps it (SQLite's final
			// commit and checkpoint; the cluster store's applier and shipper
			// caught up) before the first query: counted in the write phase.
			t0 := time.Now()
			if err := store.flush(ctx); err != nil {
				return err
			}
			phase["writes"] += time.Since(t0)
			flushed = true
		}
		t0 := time.Now()
		switch o.Op {
		case "fork":
			parent := ""
			if o.Parent != nil {
				parent = *o.Parent
			}
			_, err = m.Fork(ctx, o.Branch, parent)
		case "core_set":
			_, err = m.CoreSet(ctx, memory.CoreSetParams{Branch: o.Branch, Key: o.Key, Value: o.Value})
		case "recall_append":
			_, err = m.RecallAppend(ctx, o.Branch, memory.RecallEvent{Kind: o.Kind, Payload: o.Text})
		case "archival_write":
			_, _, err = m.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: o.Branch, Text: o.Text, Tags: o.Tags})
		case "render":
			var r memory.Rendered
			r, err = m.RenderForPrompt(ctx, o.Branch, o.Hint, o.Budget)
			if err == nil {
				renderChars += len(r.Text)
				renderMax = max(renderMax, len(r.Text))
				for _, s := range r.Sections {
					if s.Truncated || s.Compressed || len(s.LeftOut) > 0 {
						atBudget++
						break
					}
				}
				if !strings.Contains(r.Text, "(no matching archival memory)") && !strings.Contains(r.Text, "(no task hint") {
					withArchival++
				}
			}
		case "archival_search":
			var hits []memory.ArchivalItem
			hits, err = m.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: o.Branch, Query: o.Query, K: o.K})
			hitsTotal += len(hits)
			if len(hits) == 0 {
				zeroHits++
			}
		default:
			err = fmt.Errorf("unknown op %q", o.Op)
		}
		d := time.Since(t0)
		if err != nil {
			return fmt.Errorf("trace op %d (%s on %s): %w", i+1, o.Op, o.Branch, err)
		}
		lat[o.Op] = append(lat[o.Op], d)
		phase[ph] += d
	}
	t0 := time.Now()
	if err := store.flush(ctx); err != nil {
		return err
	}
	if !flushed {
		phase["writes"] += time.Since(t0)
	}

	// The trace's README: one export of the memory for root and branch
	// b0098 (the deepest).
	t0 = time.Now()
	_, exportErr := m.Export(ctx, memory.ExportParams{Root: "root", Best: "b0098", Dir: filepath.Join(tmp, "export")})
	exportTime := time.Since(t0)
	export := "failed"
	if exportErr == nil {
		export = "ok"
	}
	size, err := store.size(ctx)
	if err != nil {
		return err
	}
	for _, name := range order {
		ds := lat[name]
		if len(ds) == 0 {
			continue
		}
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		q := func(p float64) float64 {
			return float64(ds[min(len(ds)-1, int(p*float64(len(ds))))].Microseconds()) / 1000
		}
		fmt.Fprintf(out, "bench-memory trace=%s store=%s op=%s n=%d ops_per_s=%.1f p50_ms=%.3f p95_ms=%.3f p99_ms=%.3f\n",
			trace, storeName, name, len(ds), float64(len(ds))/sum.Seconds(), q(0.50), q(0.95), q(0.99))
	}
	fmt.Fprintf(out, "bench-memory trace=%s store=%s export=%s db_bytes=%d peak_rss_mb=%.1f renders_at_budget=%d renders_with_archival=%d search_zero_hits=%d\n",
		trace, storeName, export, size, peakRSSMB(), atBudget, withArchival, zeroHits)

	var writes int
	var writeTime time.Duration
	for _, name := range []string{"core_set", "recall_append", "archival_write"} {
		writes += len(lat[name])
		for _, d := range lat[name] {
			writeTime += d
		}
	}
	fmt.Fprintf(log, "  phases: forks %v, writes %v (incl. checkpoint), queries %v\n", phase["forks"].Round(time.Millisecond),
		phase["writes"].Round(time.Millisecond), phase["queries"].Round(time.Millisecond))
	fmt.Fprintf(log, "  all writes: %d ops, %.1f ops/s\n", writes, float64(writes)/writeTime.Seconds())
	if n := len(lat["render"]); n > 0 {
		fmt.Fprintf(log, "  render: mean %d chars, max %d chars\n", renderChars/n, renderMax)
	}
	if n := len(lat["archival_search"]); n > 0 {
		fmt.Fprintf(log, "  search: mean %.2f hits\n", float64(hitsTotal)/float64(n))
	}
	fmt.Fprintf(log, "  export: %s in %v (err: %v)\n", export, exportTime.Round(time.Millisecond), exportErr)
	return nil
}

func peakRSSMB() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			kb, _ := strconv.Atoi(strings.Fields(l)[1])
			return float64(kb) / 1024
		}
	}
	return 0
}
