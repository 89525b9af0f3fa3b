// Package leakcheck fails a package's tests when they leave goroutines
// running (go.uber.org/goleak), less the goroutines a library leaves by a
// race of its own, each named here with the reason.
package leakcheck

import (
	"testing"

	"go.uber.org/goleak"
)

// libraryRaces are goroutines a library may leave however it is closed.
var libraryRaces = []goleak.Option{
	// nats.go's jetstream starts this goroutine for the first asynchronous
	// publish and has it read the publisher's status channel under the
	// publisher's lock; when the connection closes first, the channel is
	// already nil and the goroutine waits on it forever (nats.go v1.55,
	// jetstream/publish.go: the stack shows a receive on a nil channel).
	goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"),
}

// Main runs the package's tests and fails them if goroutines are left.
func Main(m *testing.M) { goleak.VerifyTestMain(m, libraryRaces...) }
