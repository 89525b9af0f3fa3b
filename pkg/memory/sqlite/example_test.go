package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/memory/sqlite"
)

// A node's memory branch inherits what its parent knew when it forked and
// stays invisible to its siblings: the root's core key reaches both
// children, each child's own key and archival text only itself.
func Example_branches() {
	dir, _ := os.MkdirTemp("", "hpcq-memory-example-")
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(filepath.Join(dir, "memory.sqlite"), sqlite.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	m := memory.New(store, memory.Defaults(), memory.Options{})
	ctx := context.Background()

	_, _ = m.Fork(ctx, "root", "")
	_, _ = m.CoreSet(ctx, memory.CoreSetParams{Branch: "root", Key: "GOAL", Value: "maximize GFLOP/s"})
	for _, child := range []string{"n0001", "n0002"} {
		_, _ = m.Fork(ctx, child, "root")
	}
	_, _ = m.CoreSet(ctx, memory.CoreSetParams{Branch: "n0001", Key: "TILE", Value: "64x64 was fastest"})
	_, _, _ = m.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: "n0001", Text: "blocking by 64 doubled the stencil's GFLOP/s", Tags: []string{"result"}})

	for _, b := range []string{"n0001", "n0002"} {
		goal, _, _ := m.CoreGet(ctx, b, "GOAL")
		_, hasTile, _ := m.CoreGet(ctx, b, "TILE")
		hits, _ := m.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: b, Query: "blocking GFLOP/s", K: 5})
		fmt.Printf("%s: GOAL=%q, sees TILE: %v, archival hits: %d\n", b, goal.Value, hasTile, len(hits))
	}
	// Output:
	// n0001: GOAL="maximize GFLOP/s", sees TILE: true, archival hits: 1
	// n0002: GOAL="maximize GFLOP/s", sees TILE: false, archival hits: 0
}
