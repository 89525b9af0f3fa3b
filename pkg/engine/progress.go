package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// progressLine is the state of the run in one line: per stage nodes done,
// running and buggy, the best metric, tokens and cost so far.
func (e *engine) progressLine() string {
	type count struct{ done, running, buggy int }
	per := map[int]*count{}
	for _, n := range e.tree.Nodes() {
		s := max(n.Stage, 1)
		c := per[s]
		if c == nil {
			c = &count{}
			per[s] = c
		}
		switch {
		case !n.Done:
			c.running++
		case n.Buggy:
			c.buggy++
			c.done++
		default:
			c.done++
		}
	}
	var parts []string
	for s := 1; s <= 4; s++ {
		if c := per[s]; c != nil {
			parts = append(parts, fmt.Sprintf("s%d %d done/%d running/%d buggy", s, c.done, c.running, c.buggy))
		}
	}
	best := "best -"
	if b, ok := e.tree.Best(e.maximize()); ok {
		best = fmt.Sprintf("best %s=%g (%s)", e.spec.Metric.Name, b.Metric, b.ID)
	}
	u := e.metered.Usage()
	stage := stageState{}
	if st := e.stage.Load(); st != nil {
		stage = *st
	}
	return fmt.Sprintf("[%s] stage %d %s | %s | %s | %d calls %d tokens $%.4f", time.Now().Format("15:04:05"), stage.n, stage.name,
		strings.Join(parts, ", "), best, u.Calls, u.TokensIn+u.TokensOut, u.CostUSD)
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
