// Running a search: nodes handed to the slots, each run and recorded as
// it ends.

package search

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hpcq/hpcq/internal/tree"
)

// Mode is how nodes are handed to the slots.
type Mode int

const (
	// Async: whenever a slot frees, the next node is chosen and started.
	Async Mode = iota
	// Lockstep: start a batch of one node per slot, wait for all, repeat
	// (what step-synchronous tree searches do).
	Lockstep
)

// Stats of a search.
type Stats struct {
	Nodes int
	Wall  time.Duration
	// Busy is the sum of the nodes' run times.
	Busy time.Duration
	// Utilization = Busy / (slots x Wall).
	Utilization float64
	// StoppedBy is Policy.Stop's reason when it ended the expansion.
	StoppedBy string
}

// Run grows the policy's stage of the tree to maxNodes nodes with slots
// nodes running at once. The stage's nodes the tree holds unfinished (a
// resumed run) are run first. A node
// that fails to run is buggy with the error as its reason; the search goes
// on. It stops early when ctx ends (running nodes finish; one whose
// runner returns an error because ctx ended stays unfinished) or the tree's
// journal fails (Err says why).
//
// Long: the loop that starts and collects nodes holds its state (slots,
// running nodes, the stage's count) in locals that its select cases share;
// split, they would become a struct whose every method needs all of it.
func Run(ctx context.Context, t *Tree, p Policy, r Runner, slots, maxNodes int, mode Mode) Stats {
	if p.Rand == nil {
		p.Rand = rand.New(rand.NewPCG(1, 2))
	}
	if slots < 1 {
		slots = 1
	}
	start := time.Now()
	var busy time.Duration
	var mu sync.Mutex
	done := make(chan struct{}, slots)
	run := func(n *tree.Node) {
		n0 := time.Now()
		res, err := r.Run(ctx, n)
		d := time.Since(n0)
		if err != nil && ctx.Err() != nil {
			// Interrupted, not failed: the node stays unfinished, and a
			// resumed search runs it.
			mu.Lock()
			busy += d
			mu.Unlock()
			done <- struct{}{}
			return
		}
		t.mu.Lock()
		fin := *n
		fin.Done, fin.Started, fin.Finished = true, n0, n0.Add(d)
		if err != nil {
			fin.Buggy, fin.Reason = true, err.Error()
		} else {
			fin.Buggy, fin.Reason, fin.Metric, fin.HasMetric, fin.NotRun = res.Buggy, res.Reason, res.Metric, res.HasMetric, res.NotRun
			fin.Q1, fin.Q3, fin.HasSpread = res.Q1, res.Q3, res.HasSpread && res.HasMetric
		}
		// The result is journaled before the policy can see it.
		if jerr := t.record(tree.Finished, &fin); jerr != nil && t.err == nil {
			t.err = jerr
		} else if jerr == nil {
			t.set(n, fin)
		}
		t.mu.Unlock()
		mu.Lock()
		busy += d
		mu.Unlock()
		done <- struct{}{}
	}
	t.mu.Lock()
	var pending []*tree.Node
	total := 0
	for _, n := range t.nodes {
		if stageOf(n) != max(p.Stage, 1) {
			continue
		}
		total++
		if !n.Done {
			pending = append(pending, n)
		}
	}
	t.mu.Unlock()
	ran, running := 0, 0
	var stoppedBy string
	for ctx.Err() == nil {
		var n *tree.Node
		if len(pending) > 0 {
			n, pending = pending[0], pending[1:]
		} else if total < maxNodes {
			if p.Stop != nil {
				if stop, why := p.Stop(); stop {
					stoppedBy = why
					break
				}
			}
			t.mu.Lock()
			next, wait := t.next(&p)
			t.mu.Unlock()
			if wait && running > 0 {
				<-done // a node to decide from
				running--
				continue
			}
			if next == nil {
				break // the journal failed
			}
			n = next
			total++
		} else {
			break
		}
		ran++
		running++
		go run(n)
		full := running == slots
		if mode == Lockstep {
			full = running == slots || (len(pending) == 0 && total >= maxNodes)
			if full {
				for ; running > 0; running-- {
					<-done
				}
			}
			continue
		}
		if full {
			<-done
			running--
		}
	}
	for ; running > 0; running-- {
		<-done
	}
	wall := time.Since(start)
	return Stats{Nodes: ran, Wall: wall, Busy: busy, Utilization: float64(busy) / (float64(slots) * float64(wall)), StoppedBy: stoppedBy}
}
