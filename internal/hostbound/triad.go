package hostbound

import (
	"fmt"
	"sync"
	"time"
)

// Triad measures memory bandwidth as STREAM's triad does (a[i] = b[i] +
// s*c[i], 24 bytes an element: two reads and a write, no write-allocate
// counted) with one goroutine per CPU on arrays of n doubles each, the
// best of trials, in GB/s. n should make the arrays several times the
// last-level cache; the figure is a measured one, below the host's true
// peak (this is why a bandwidth limit is a multiple of it: Limit).
func Triad(cpus, n, trials int) (gbs float64, how string) {
	a, b, c := make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range b {
		b[i], c[i] = 1, 2
	}
	chunk := (n + cpus - 1) / cpus
	best := time.Duration(1<<63 - 1)
	for range trials {
		var wg sync.WaitGroup
		start := time.Now()
		for lo := 0; lo < n; lo += chunk {
			hi := min(lo+chunk, n)
			wg.Add(1)
			go func() {
				defer wg.Done()
				triad(a[lo:hi], b[lo:hi], c[lo:hi], 3)
			}()
		}
		wg.Wait()
		best = min(best, time.Since(start))
	}
	bytes := 24 * float64(n)
	gbs = bytes / best.Seconds() / 1e9
	return gbs, fmt.Sprintf("STREAM triad, %d threads, 3 x %d MiB arrays, best of %d", cpus, n*8>>20, trials)
}

func triad(a, b, c []float64, s float64) {
	c = c[:len(a)]
	b = b[:len(a)]
	for i := range a {
		a[i] = b[i] + s*c[i]
	}
}
