//go:build race

package executor

// raceEnabled: the race detector's shadow memory multiplies the heap.
const raceEnabled = true
