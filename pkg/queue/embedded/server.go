// Package embedded runs a NATS server with JetStream inside the process:
// local mode, the tests and the benchmarks need no nats-server binary. It is
// apart from the queue client so that a program that only connects (a
// worker, the LLM gateway) does not link the server.
//
// [Server.Connect] gives in-process clients whose writes are handed to the
// server's pipe by a goroutine of their own, in order (a pipe's write waits
// for the server's read loop, and nats.go flushes under its connection's
// lock). Close waits for the buffered bytes to reach the server.
package embedded

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

// Options configure an in-process nats-server with JetStream.
type Options struct {
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

// Server is a running in-process nats-server.
type Server struct {
	srv        *server.Server
	lock       *os.File // flock on the store: one server per store
	user, pass string
}

// Start starts a nats-server with JetStream on disk in o.StoreDir
// and waits until it accepts clients.
func Start(o Options) (*Server, error) {
	if o.StoreDir == "" {
		return nil, errors.New("embedded: Options.StoreDir is required")
	}
	if err := os.MkdirAll(o.StoreDir, 0o755); err != nil {
		return nil, fmt.Errorf("embedded: server store: %w", err)
	}
	abs, err := filepath.Abs(o.StoreDir)
	if err != nil {
		return nil, fmt.Errorf("embedded: server store: %w", err)
	}
	// One server per store: a second one on the same files would corrupt
	// them. The lock goes with the process (a kill -9 releases it).
	lock, err := os.OpenFile(filepath.Join(abs, "hpcq.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("embedded: server store: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is used by another process's embedded server", ErrStoreInUse, abs)
		}
		return nil, fmt.Errorf("embedded: server store lock: %w", err)
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
		return nil, fmt.Errorf("embedded: server: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		lock.Close()
		return nil, errors.New("embedded: server did not become ready within 10s")
	}
	return &Server{srv: srv, lock: lock, user: o.User, pass: o.Password}, nil
}

// ClientURL is the TCP URL of the server, or "" when it does not listen.
func (e *Server) ClientURL() string {
	if e.srv.Addr() == nil {
		return ""
	}
	return e.srv.ClientURL()
}

// Connect opens an in-process client connection to the server.
func (e *Server) Connect(name string) (*nats.Conn, error) {
	opts := []nats.Option{nats.InProcessServer(inProcess{e.srv}), nats.Name(name), nats.MaxReconnects(-1)}
	if e.user != "" {
		opts = append(opts, nats.UserInfo(e.user, e.pass))
	}
	nc, err := nats.Connect("", opts...)
	if err != nil {
		return nil, fmt.Errorf("embedded: connect to server: %w", err)
	}
	return nc, nil
}

// Shutdown stops the server and waits for it to finish.
func (e *Server) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	e.lock.Close() // releases the store's lock
}

// ErrStoreInUse: another process runs an embedded server on the store.
var ErrStoreInUse = errors.New("embedded: server store in use")
