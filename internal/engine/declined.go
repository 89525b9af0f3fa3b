package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// declinedNote says, at the end of a run, why the workers declined its
// nodes that did not finish (their registry keeps each decline's reason):
// each reason once, with its nodes; "every task was declined: ..." when no
// node finished at all. "" when none was declined.
func (e *engine) declinedNote(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	workers, err := e.p.Queue.Workers(ctx)
	if err != nil {
		return ""
	}
	done, undone := 0, map[string]bool{}
	for _, n := range e.tree.Nodes() {
		if n.Done {
			done++
		} else {
			undone[n.ID] = true
		}
	}
	byReason := map[string][]string{}
	for _, w := range workers {
		for _, d := range w.Declined {
			if d.Run == e.s.RunID && undone[d.Node] && !slices.Contains(byReason[d.Reason], d.Node) {
				byReason[d.Reason] = append(byReason[d.Reason], d.Node)
			}
		}
	}
	if len(byReason) == 0 {
		return ""
	}
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(byReason)) {
		nodes := byReason[r]
		slices.Sort(nodes)
		parts = append(parts, fmt.Sprintf("%s (%d: %s)", r, len(nodes), strings.Join(nodes, ", ")))
	}
	if done == 0 {
		return "every task was declined: " + strings.Join(parts, "; ")
	}
	return "tasks declined by the workers: " + strings.Join(parts, "; ")
}
