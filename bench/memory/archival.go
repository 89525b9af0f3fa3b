package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/hpcq/hpcq/pkg/memory"
)

// archivalBench loads n synthetic archival texts into 50 branches (a
// binary tree, each branch forked after its parent's texts, so a leaf sees
// its whole path: about 6 branches) through Apply batches of 100, then runs
// 200 two-word searches (k=8), each scoped to a random branch, and prints:
//
//	bench-archival store=<s> n_docs=<n> search_p50_ms=<f> search_p95_ms=<f> insert_docs_per_s=<f>
//
// insert_docs_per_s counts until every text is durable where the store
// keeps it (the final flush included).
func archivalBench(ctx context.Context, store *benchStore, storeName string, n int, out, log io.Writer) error {
	const branches, batch, searches = 50, 100, 200
	rng := rand.New(rand.NewPCG(1, 2))
	vocab := make([]string, 5000)
	for i := range vocab {
		vocab[i] = fmt.Sprintf("w%03d%s", i, []string{"alpha", "omp", "mpi", "simd", "tile", "halo", "cache", "vec"}[i%8])
	}
	// Zipf-like word choice: a few words are common, most are rare.
	zipf := rand.NewZipf(rand.New(rand.NewPCG(3, 4)), 1.1, 1, uint64(len(vocab)-1))
	text := func() string {
		w := make([]string, 12)
		for i := range w {
			w[i] = vocab[zipf.Uint64()]
		}
		return strings.Join(w, " ")
	}
	name := func(i int) string { return fmt.Sprintf("a%02d", i) }
	perBranch := n / branches
	start := time.Now()
	written := 0
	for b := range branches {
		parent := ""
		if b > 0 {
			parent = name((b - 1) / 2)
		}
		if _, err := store.Fork(ctx, memory.ForkParams{Branch: name(b), Parent: parent}); err != nil {
			return err
		}
		for done := 0; done < perBranch; done += batch {
			p := memory.ApplyParams{Branch: name(b)}
			for range min(batch, perBranch-done) {
				p.Archival = append(p.Archival, memory.ArchivalWriteParams{Text: text(), Tags: []string{"kind:note"}})
			}
			if err := store.Apply(ctx, p); err != nil {
				return err
			}
			written += len(p.Archival)
		}
		if (b+1)%10 == 0 {
			fmt.Fprintf(log, "  archival: %d texts in %v\n", written, time.Since(start).Round(time.Millisecond))
		}
	}
	if err := store.flush(ctx); err != nil {
		return err
	}
	insert := time.Since(start)
	var lat []time.Duration
	hits := 0
	for range searches {
		q := vocab[zipf.Uint64()] + " " + vocab[rng.IntN(200)]
		br := name(rng.IntN(branches))
		t0 := time.Now()
		res, err := store.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: br, Query: q, K: 8})
		if err != nil {
			return err
		}
		lat = append(lat, time.Since(t0))
		hits += len(res)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)))].Microseconds()) / 1000 }
	fmt.Fprintf(out, "bench-archival store=%s n_docs=%d search_p50_ms=%.3f search_p95_ms=%.3f insert_docs_per_s=%.1f\n",
		storeName, written, q(0.50), q(0.95), float64(written)/insert.Seconds())
	fmt.Fprintf(log, "  archival: insert %v, %.2f hits per search, peak RSS %.0f MB\n", insert.Round(time.Millisecond), float64(hits)/searches, peakRSSMB())
	return nil
}

func runArchival(storeName string, n int, out, log io.Writer) error {
	return withStore(storeName, func(ctx context.Context, store *benchStore, _ string) error {
		return archivalBench(ctx, store, storeName, n, out, log)
	})
}

// repeatsBench is a stage's siblings writing the same lesson: n branches
// forked from one base node (under the root), each writing the lesson
// again (a repeat of the base's text, counted per scope) and a note of its
// own through Apply, as nodes' memory updates do; then 200 searches for
// the lesson, each scoped to a random sibling (which sees the base's text
// and its own repeat, not the n-1 others). It prints:
//
//	bench-repeats store=<s> repeats=<n> search_p50_ms=<f> search_p95_ms=<f>
func repeatsBench(ctx context.Context, store *benchStore, storeName string, n int, out, log io.Writer) error {
	const searches = 200
	lesson := "tile the stencil by 32 and pin the OpenMP threads close"
	if _, err := store.Fork(ctx, memory.ForkParams{Branch: "root"}); err != nil {
		return err
	}
	if _, err := store.Fork(ctx, memory.ForkParams{Branch: "base", Parent: "root"}); err != nil {
		return err
	}
	if err := store.Apply(ctx, memory.ApplyParams{Branch: "base", Archival: []memory.ArchivalWriteParams{{Text: lesson}}}); err != nil {
		return err
	}
	name := func(i int) string { return fmt.Sprintf("n%05d", i) }
	start := time.Now()
	for i := range n {
		if _, err := store.Fork(ctx, memory.ForkParams{Branch: name(i), Parent: "base"}); err != nil {
			return err
		}
		if err := store.Apply(ctx, memory.ApplyParams{Branch: name(i), Archival: []memory.ArchivalWriteParams{
			{Text: lesson}, {Text: fmt.Sprintf("node %d tried a tile of %d", i, 8<<(i%4))}}}); err != nil {
			return err
		}
	}
	if err := store.flush(ctx); err != nil {
		return err
	}
	fmt.Fprintf(log, "  repeats: %d siblings written in %v\n", n, time.Since(start).Round(time.Millisecond))
	rng := rand.New(rand.NewPCG(5, 6))
	var lat []time.Duration
	for range searches {
		br := name(rng.IntN(n))
		t0 := time.Now()
		res, err := store.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: br, Query: "stencil tile OpenMP", K: 8})
		if err != nil {
			return err
		}
		lat = append(lat, time.Since(t0))
		if len(res) == 0 || res[0].Text != lesson || res[0].Count != 2 {
			return fmt.Errorf("search in %s: want the lesson seen twice (the base's text and its own repeat), got %+v", br, res)
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)))].Microseconds()) / 1000 }
	fmt.Fprintf(out, "bench-repeats store=%s repeats=%d search_p50_ms=%.3f search_p95_ms=%.3f\n", storeName, n, q(0.50), q(0.95))
	return nil
}

func runRepeats(storeName string, n int, out, log io.Writer) error {
	return withStore(storeName, func(ctx context.Context, store *benchStore, _ string) error {
		return repeatsBench(ctx, store, storeName, n, out, log)
	})
}
