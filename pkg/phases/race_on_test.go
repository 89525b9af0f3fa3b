//go:build race

package phases

// raceEnabled: the race detector's shadow memory multiplies the heap.
const raceEnabled = true
