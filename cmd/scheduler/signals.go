package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// signalContext is the context a command runs in: SIGTERM or SIGINT end it.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
}

// secondInterrupt is closed by the SIGTERM or SIGINT after the one that
// ended ctx: a run then stops waiting for its spooled writes.
func secondInterrupt(ctx context.Context) <-chan struct{} {
	abandon := make(chan struct{})
	go func() {
		<-ctx.Done()
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		<-sig
		signal.Stop(sig)
		close(abandon)
	}()
	return abandon
}
