package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hpcq/hpcq/pkg/schema"
)

// progressLine is the state of the run in one line: per stage nodes done,
// running and buggy, and those not running yet (being written by the
// model, queued with no worker on them, declined by a worker), the best
// metric, tokens and cost so far.
func (e *engine) progressLine() string {
	type count struct{ done, preparing, queued, declined, running, buggy int }
	reg := e.reg.read(e)
	per := map[int]*count{}
	for _, n := range e.tree.Nodes() {
		s := max(n.Stage, 1)
		c := per[s]
		if c == nil {
			c = &count{}
			per[s] = c
		}
		_, published := e.published.Load(n.ID)
		switch {
		case !n.Done && !published:
			c.preparing++
		case !n.Done && reg[n.ID] == nodeRunning:
			c.running++
		case !n.Done && reg[n.ID] == nodeDeclined:
			c.declined++
		case !n.Done:
			c.queued++
		case n.Buggy:
			c.buggy++
			c.done++
		default:
			c.done++
		}
	}
	var parts []string
	for s := 1; s <= 4; s++ {
		c := per[s]
		if c == nil {
			continue
		}
		part := fmt.Sprintf("s%d %d done/%d running/%d buggy", s, c.done, c.running, c.buggy)
		var waiting []string
		for _, w := range []struct {
			n    int
			word string
		}{{c.preparing, schema.NodePreparing}, {c.queued, schema.NodeQueued}, {c.declined, schema.NodeDeclined}} {
			if w.n > 0 {
				waiting = append(waiting, fmt.Sprintf("%d %s", w.n, w.word))
			}
		}
		if len(waiting) > 0 {
			part += " (" + strings.Join(waiting, ", ") + ")"
		}
		parts = append(parts, part)
	}
	best := "best -"
	if b, ok := e.tree.Best(e.maximize()); ok {
		best = fmt.Sprintf("best %s=%g (%s)", e.s.Spec.Metric.Name, b.Metric, b.ID)
	}
	u := e.s.Client.Usage()
	stage := stageState{}
	if st := e.stage.Load(); st != nil {
		stage = *st
	}
	return fmt.Sprintf("[%s] stage %d %s | %s | %s | %d calls %s tokens %s", time.Now().Format("15:04:05"), stage.n, stage.name,
		strings.Join(parts, ", "), best, u.Calls, u.Tokens(), u.Cost())
}

// StatusLine shows one line in place on a terminal, log records above it.
type StatusLine interface {
	Status(line string)
	// Done draws the line a last time and leaves it.
	Done(line string)
}

// startProgress shows the run's progress until the returned function is
// called: redrawn in place every second on a terminal, a plain line every
// ProgressEvery otherwise.
func (e *engine) startProgress(ctx context.Context) func() {
	w, status := e.p.Progress, e.p.Status
	if w == nil && status == nil {
		return func() {}
	}
	every := e.p.ProgressEvery
	if every <= 0 {
		every = 10 * time.Second
	}
	if status != nil {
		every = time.Second
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if status != nil {
					status.Status(e.progressLine())
				} else {
					fmt.Fprintln(w, e.progressLine())
				}
			case <-done:
				if status != nil {
					status.Done(e.progressLine())
				}
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// What the registry says of a node.
const (
	nodeRunning  = 1
	nodeDeclined = 2
)

// registryView is the workers' registry as the progress line reads it:
// node id -> nodeRunning or nodeDeclined, read at most every 2 s.
type registryView struct {
	mu    sync.Mutex
	at    time.Time
	nodes map[string]int
}

func (v *registryView) read(e *engine) map[string]int {
	v.mu.Lock()
	defer v.mu.Unlock()
	if e.p.Queue == nil || time.Since(v.at) < 2*time.Second {
		return v.nodes
	}
	v.at = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	workers, err := e.p.Queue.Workers(ctx)
	if err != nil {
		return v.nodes // as last read
	}
	nodes := map[string]int{}
	for _, w := range workers {
		if w.Lost {
			continue
		}
		for _, d := range w.Declined {
			if d.Run == e.s.RunID {
				nodes[d.Node] = nodeDeclined
			}
		}
	}
	for _, w := range workers {
		for _, t := range w.Tasks {
			if !w.Lost && t.Run == e.s.RunID {
				nodes[t.Node] = nodeRunning
			}
		}
	}
	v.nodes = nodes
	return nodes
}
