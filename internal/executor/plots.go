package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hpcq/hpcq/internal/fileio"
)

// Plots are looked for in the workspace up to this depth and count,
// visiting at most plotVisited entries.
const (
	plotDepth   = 6
	plotMax     = 64
	plotVisited = 20000
)

// findPlots walks the workspace breadth first (a directory's files before
// the next level's, names in order), not following links, skipping what it
// cannot read, for at most plotMax plots in plotVisited entries: a plot at
// the top is found whatever junk a program left deeper. note says what was
// left out and why. It stops, saying so, when ctx ends.
func findPlots(ctx context.Context, ws string, skip map[string]bool) (plots []string, note string) {
	root, err := os.OpenRoot(ws)
	if err != nil {
		return nil, "plots: workspace not read: " + err.Error()
	}
	defer root.Close()
	visited, unreadable := 0, 0
	var odd []string // plot names that are not regular files
	level := []string{"."}
	for depth := 0; len(level) > 0 && depth <= plotDepth; depth++ {
		var next []string
		for _, dir := range level {
			if ctx.Err() != nil {
				return plots, fmt.Sprintf("plots: the walk stopped after %d entries (breadth first, at depth %d): out of time", visited, depth)
			}
			entries, full, err := readDirUpTo(root, dir, plotVisited-visited)
			if err != nil {
				unreadable++
				continue
			}
			visited += len(entries)
			for _, d := range entries {
				rel := filepath.Join(dir, d.Name())
				switch ext := strings.ToLower(filepath.Ext(rel)); {
				case d.IsDir():
					next = append(next, rel)
				case (ext == ".png" || ext == ".svg") && !d.Type().IsRegular():
					if len(odd) < 3 {
						odd = append(odd, rel+" ("+fileio.TypeName(d.Type())+")")
					}
				case (ext == ".png" || ext == ".svg") && !skip[rel]:
					if len(plots) == plotMax {
						return plots, fmt.Sprintf("plots: the first %d found were kept, the rest left (%d entries looked at, breadth first)", plotMax, visited)
					}
					plots = append(plots, rel)
				}
			}
			if !full {
				return plots, fmt.Sprintf("plots: the walk stopped after %d entries (breadth first, at depth %d): deeper plots were not looked for", visited, depth)
			}
		}
		level = next
	}
	var notes []string
	if len(odd) > 0 {
		notes = append(notes, "plots: skipped, not regular files: "+strings.Join(odd, ", "))
	}
	if unreadable > 0 {
		notes = append(notes, fmt.Sprintf("plots: %d unreadable directories skipped", unreadable))
	}
	return plots, strings.Join(notes, "; ")
}

// readDirUpTo reads at most n entries of dir under root, in name order
// (full: the directory had no more).
func readDirUpTo(root *os.Root, dir string, n int) (entries []os.DirEntry, full bool, err error) {
	if n <= 0 {
		return nil, false, nil
	}
	f, err := root.Open(dir)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	entries, err = f.ReadDir(n + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, false, err
	}
	full = len(entries) <= n
	entries = entries[:min(len(entries), n)]
	slices.SortFunc(entries, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, full, nil
}
