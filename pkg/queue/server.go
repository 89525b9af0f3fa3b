package queue

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hpcq/hpcq/pkg/schema"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// EmbeddedOptions configure an in-process nats-server with JetStream.
type EmbeddedOptions struct {
	// StoreDir holds the JetStream files. Required; local mode uses
	// <run-dir>/nats.
	StoreDir string
	// Listen makes the server accept TCP clients on Host:Port as well as
	// in-process ones. Off by default: local mode needs no socket.
	Listen bool
	// Host to listen on. Defaults to 127.0.0.1.
	Host string
	// Port to listen on; 0 picks a free port. Used only with Listen.
	Port int
	// User and Password, when set, are required of every client, the
	// in-process ones included (Connect passes them).
	User, Password string
}

// Embedded is a running in-process nats-server.
type Embedded struct {
	srv        *server.Server
	lock       *os.File // flock on the store: one server per store
	user, pass string
}

// StartEmbedded starts a nats-server with JetStream on disk in o.StoreDir
// and waits until it accepts clients.
func StartEmbedded(o EmbeddedOptions) (*Embedded, error) {
	if o.StoreDir == "" {
		return nil, fmt.Errorf("%w: EmbeddedOptions.StoreDir is required", ErrInvalidOption)
	}
	if err := os.MkdirAll(o.StoreDir, 0o755); err != nil {
		return nil, fmt.Errorf("queue: embedded server store: %w", err)
	}
	abs, err := filepath.Abs(o.StoreDir)
	if err != nil {
		return nil, fmt.Errorf("queue: embedded server store: %w", err)
	}
	// One server per store: a second one on the same files would corrupt
	// them. The lock goes with the process (a kill -9 releases it).
	lock, err := os.OpenFile(filepath.Join(abs, "hpcq.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("queue: embedded server store: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is used by another process's embedded server", ErrStoreInUse, abs)
		}
		return nil, fmt.Errorf("queue: embedded server store lock: %w", err)
	}
	sopts := &server.Options{
		ServerName:         "hpcq-embedded",
		JetStream:          true,
		StoreDir:           abs,
		NoSigs:             true,
		NoLog:              true,
		MaxPayload:         schema.MaxTaskBytes + 64<<10,
		JetStreamMaxMemory: 256 << 20,
		DontListen:         !o.Listen,
		Host:               o.Host,
		Port:               o.Port,
		Username:           o.User,
		Password:           o.Password,
	}
	if o.Listen {
		if sopts.Host == "" {
			sopts.Host = "127.0.0.1"
		}
		if sopts.Port == 0 {
			sopts.Port = server.RANDOM_PORT
		}
	}
	srv, err := server.NewServer(sopts)
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("queue: embedded server: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		lock.Close()
		return nil, errors.New("queue: embedded server did not become ready within 10s")
	}
	return &Embedded{srv: srv, lock: lock, user: o.User, pass: o.Password}, nil
}

// ClientURL is the TCP URL of the server, or "" when it does not listen.
func (e *Embedded) ClientURL() string {
	if e.srv.Addr() == nil {
		return ""
	}
	return e.srv.ClientURL()
}

// Connect opens an in-process client connection to the server.
func (e *Embedded) Connect(name string) (*nats.Conn, error) {
	opts := []nats.Option{nats.InProcessServer(inProcess{e.srv}), nats.Name(name), nats.MaxReconnects(-1)}
	if e.user != "" {
		opts = append(opts, nats.UserInfo(e.user, e.pass))
	}
	nc, err := nats.Connect("", opts...)
	if err != nil {
		return nil, fmt.Errorf("queue: connect to embedded server: %w", err)
	}
	return nc, nil
}

// Shutdown stops the server and waits for it to finish.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	e.lock.Close() // releases the store's lock
}

// ErrStoreInUse: another process runs an embedded server on the store.
var ErrStoreInUse = errors.New("queue: embedded server store in use")
