//go:build !race

package phases

const raceEnabled = false
