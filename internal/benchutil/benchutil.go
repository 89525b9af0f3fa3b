// Package benchutil holds what the benchmark commands (bench/...) share.
package benchutil

import (
	"fmt"
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
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

// Trace starts a Go execution trace (`go tool trace`) written to path and
// returns the function that stops it; with an empty path it traces
// nothing. stop may be called more than once. A trace shows what a CPU
// profile does not: which goroutine woke which, and how often (the
// engine's hand-offs per node were counted so).
func Trace(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("trace: %w", err)
	}
	return func() {
		trace.Stop()
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
