// Package benchutil holds what the benchmark commands (bench/...) share.
package benchutil

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"syscall"
	"time"
)

// CPUTime is the CPU time this process has used so far, user and system.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// CPUProfile starts a CPU profile written to path and returns the function
// that stops it; with an empty path it profiles nothing and stop does
// nothing. stop may be called more than once.
func CPUProfile(path string) (stop func(), err error) {
	return record(path, "cpu profile", pprof.StartCPUProfile, pprof.StopCPUProfile)
}

// Trace starts a Go execution trace (`go tool trace`) written to path and
// returns the function that stops it, as CPUProfile does. A trace shows
// what a CPU profile does not: which goroutine woke which, and how often
// (the engine's hand-offs per node were counted so).
func Trace(path string) (stop func(), err error) {
	return record(path, "trace", trace.Start, trace.Stop)
}

// record runs start on a new file at path, and returns the function that
// calls end and closes the file; with an empty path, nothing.
func record(path, what string, start func(io.Writer) error, end func()) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := start(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return func() {
		end()
		_ = f.Close()
	}, nil
}

// HeapProfile writes the live heap (after a collection) to path.
func HeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("heap profile: %w", err)
	}
	return f.Close()
}
