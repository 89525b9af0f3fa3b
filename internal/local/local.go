package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/hpcq/hpcq/internal/assemble"
	"github.com/hpcq/hpcq/internal/executor"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/queue/embedded"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// Params configure a local cluster in one process.
type Params struct {
	// RunDir is the run's directory; the embedded server keeps its
	// JetStream files in RunDir/nats and the workers their workspaces and
	// logs under RunDir. Its base name is the run id. Required.
	RunDir string
	// Workers is the number of in-process workers. Defaults to 1.
	Workers int
	// Worker configures each worker (Pools, Slots, Cores, ...). ID is set
	// per worker.
	Worker worker.Config
	// Phases configures the executor; RunsDir is set from RunDir.
	Phases executor.Config
	// Executor replaces the phases executor (benchmarks, tests).
	Executor worker.Executor
	// GatewayInstaller gives the workers the iterative installer, asking
	// the model through the LLM gateway on the embedded server (what
	// cluster workers do through theirs); a `scheduler run` serves it.
	GatewayInstaller bool
	// Queue options.
	Queue queue.Options
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Cluster is an embedded NATS server, a Queue on it, and in-process workers:
// the cluster mode with every piece in one process.
type Cluster struct {
	Server *embedded.Server
	Conn   *nats.Conn
	Queue  *queue.Queue
	RunID  string

	cancel     context.CancelFunc
	wg         sync.WaitGroup
	mu         sync.Mutex
	errs       []error
	failed     chan struct{}
	failedOnce sync.Once
	dir        rundir.Dir
}

// Failed is closed when a local worker stopped with an error: nothing
// would run the tasks any more, so a caller waiting for results should
// give up. Close returns the errors.
func (l *Cluster) Failed() <-chan struct{} { return l.failed }

// Start starts the server and the workers.
func Start(ctx context.Context, p Params) (*Cluster, error) {
	if p.RunDir == "" {
		return nil, errors.New("scheduler: Params.RunDir is required")
	}
	if p.Workers <= 0 {
		p.Workers = 1
	}
	log := p.Logger
	if log == nil {
		log = slog.Default()
	}
	runDir, err := filepath.Abs(p.RunDir)
	if err != nil {
		return nil, err
	}
	srv, nc, q, err := startServer(ctx, runDir, p.Queue, log)
	if err != nil {
		return nil, err
	}
	l := &Cluster{Server: srv, Conn: nc, Queue: q, RunID: filepath.Base(runDir), failed: make(chan struct{}), dir: rundir.Dir(runDir)}
	exec, wcfg := p.Executor, p.Worker
	if exec == nil {
		pc := p.Phases
		pc.RunsDir = filepath.Dir(runDir)
		e, c, err := assemble.Worker(ctx, assemble.Params{Queue: q, Executor: pc, Worker: p.Worker, Installer: p.GatewayInstaller, Logger: log})
		if err != nil {
			l.shutdown()
			return nil, err
		}
		exec, wcfg = e, c
	}
	wctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	for i := range p.Workers {
		wc := wcfg
		wc.ID = fmt.Sprintf("local-%d", i+1)
		wc.Logger = log
		w, err := worker.New(q, exec, wc)
		if err != nil {
			l.Close()
			return nil, err
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			if err := w.Run(wctx); err != nil {
				l.mu.Lock()
				l.errs = append(l.errs, fmt.Errorf("worker %s: %w", wc.ID, err))
				l.mu.Unlock()
				log.Error("local worker failed", "worker", wc.ID, "err", err)
				l.failedOnce.Do(func() { close(l.failed) })
			}
		}()
	}
	return l, nil
}

// startServer starts the embedded server of runDir and a queue on it. The
// server also listens on a loopback port, with a password recorded in the
// run directory (mode 0600), so that other processes of the user
// (scheduler status, ls, logs, cancel) reach the run while it goes.
func startServer(ctx context.Context, runDir string, opts queue.Options, log *slog.Logger) (*embedded.Server, *nats.Conn, *queue.Queue, error) {
	password, err := randomSecret()
	if err != nil {
		return nil, nil, nil, err
	}
	srv, err := embedded.Start(embedded.Options{StoreDir: rundir.Dir(runDir).Path(rundir.NATSDir),
		Listen: true, Host: "127.0.0.1", User: "hpcq", Password: password})
	if err != nil {
		return nil, nil, nil, err
	}
	serverFile := rundir.Dir(runDir).Path(rundir.ServerFile)
	if err := rundir.Dir(runDir).WriteServer(rundir.Server{URL: srv.ClientURL(), User: "hpcq", Password: password, PID: os.Getpid()}); err != nil {
		srv.Shutdown()
		return nil, nil, nil, fmt.Errorf("local: %s: %w", rundir.ServerFile, err)
	}
	nc, err := srv.Connect("hpcq-local")
	if err != nil {
		_ = os.Remove(serverFile)
		srv.Shutdown()
		return nil, nil, nil, err
	}
	q, err := queue.New(ctx, nc, opts, log)
	if err != nil {
		nc.Close()
		_ = os.Remove(serverFile)
		srv.Shutdown()
		return nil, nil, nil, err
	}
	return srv, nc, q, nil
}

// Close drains the workers, then stops the server. It returns the workers'
// errors, if any.
func (l *Cluster) Close() error {
	if l.cancel != nil {
		l.cancel()
	}
	l.wg.Wait()
	l.shutdown()
	l.mu.Lock()
	defer l.mu.Unlock()
	return errors.Join(l.errs...)
}

func (l *Cluster) shutdown() {
	_ = os.Remove(l.dir.Path(rundir.ServerFile))
	l.Conn.Close()
	l.Server.Shutdown()
}

// randomSecret is 24 random bytes, hex.
func randomSecret() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
