package web

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hpcq/hpcq/internal/runview"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// TokenEnv is the environment variable holding the token a dashboard
// listening beyond loopback requires.
const TokenEnv = "HPCQ_HTTP_TOKEN"

// Options are what a Server serves and how.
type Options struct {
	// RunDir serves one run; RunsDir every run directory under it. One of
	// the two is required.
	RunDir  string
	RunsDir string
	// Live is the run going in this process, if any: its status is
	// "running" whatever its directory says.
	Live string
	// Query runs one read statement on the results of the run in dir (its
	// SQLite file or ClickHouse). Nil: no LLM calls and costs.
	Query func(ctx context.Context, dir, sql string) (*results.Table, error)
	// Memory opens the memory store of the run in dir; the function
	// returned closes it. Nil: no memory view.
	Memory func(ctx context.Context, dir string) (memory.Store, func(), error)
	// Archive, when set, runs one read statement on the cluster's results
	// store (ClickHouse): runs it knows that have no directory here are
	// listed and shown from its tables.
	Archive func(ctx context.Context, sql string) (*results.Table, error)
	// Cluster reads the queue's state as the run in dir sees it ("" for
	// a run only the archive knows: the configured server). Nil: no
	// cluster panel.
	Cluster func(ctx context.Context, dir string) (*Cluster, error)
	// Metrics, when set, is served at /metrics.
	Metrics http.Handler
	// Token, when set, is required of every request (Authorization:
	// Bearer, or the cookie set by opening /?token=...).
	Token string
	// Secrets are values no answer may contain (the model's API key,
	// passwords of the servers): replaced by [REDACTED], as are the secrets
	// memory.Redact recognizes.
	Secrets []string
	// Poll is how often the run directories are read for the events
	// stream (default 1s).
	Poll time.Duration
	Log  *slog.Logger
}

// Cluster is the queue as the dashboard's cluster panel shows it.
type Cluster struct {
	Pools   []queue.PoolStats    `json:"pools"`
	Workers []queue.WorkerStatus `json:"workers"`
	Bridges []BridgePool         `json:"bridges,omitempty"`
	// Error says why part of it could not be read.
	Error string `json:"error,omitempty"`
}

// BridgePool is what a slurm-bridge last recorded of one of its pools.
type BridgePool struct {
	Bridge       string    `json:"bridge"`
	Pool         string    `json:"pool"`
	Backlog      uint64    `json:"backlog"`
	Workers      int       `json:"workers"`
	JobsPending  int       `json:"jobs_pending"`
	JobsRunning  int       `json:"jobs_running"`
	Submitted    int       `json:"submitted"`
	Paused       bool      `json:"paused"`
	PausedReason string    `json:"paused_reason,omitempty"`
	LastError    string    `json:"last_error,omitempty"`
	Failures     int       `json:"failures"`
	Updated      time.Time `json:"updated"`
}

// Server serves the dashboard, the JSON API and the events streams.
type Server struct {
	o       Options
	log     *slog.Logger
	redact  *redactor
	handler http.Handler

	mu       sync.Mutex
	watchers map[string]*watcher // by run id
}

// New checks the options and builds the server.
func New(o Options) (*Server, error) {
	if (o.RunDir == "") == (o.RunsDir == "") {
		return nil, errors.New("web: serve one run (--run-dir) or a runs directory (--runs)")
	}
	for _, d := range []string{o.RunDir, o.RunsDir} {
		if d == "" {
			continue
		}
		fi, err := os.Stat(d)
		if err != nil {
			return nil, fmt.Errorf("web: %w", err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("web: %s is not a directory", d)
		}
	}
	if o.RunDir != "" {
		if _, err := rundir.Dir(o.RunDir).ReadInfo(); err != nil {
			return nil, fmt.Errorf("web: %w", err)
		}
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	secrets := append([]string(nil), o.Secrets...)
	if o.Token != "" {
		secrets = append(secrets, o.Token)
	}
	s := &Server{o: o, log: o.Log, redact: newRedactor(secrets), watchers: map[string]*watcher{}}
	s.handler = s.routes()
	return s, nil
}

// Handler is the server's handler: authentication, then the routes.
func (s *Server) Handler() http.Handler { return s.handler }

// Listen opens addr for the server. An address that is not loopback needs
// a token; so does one whose host is empty (every interface).
func Listen(addr, token string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--http %q: %w", addr, err)
	}
	if !isLoopbackHost(host) && token == "" {
		return nil, fmt.Errorf("--http %s listens beyond this machine: set %s to a token the dashboard will require (or listen on 127.0.0.1 and use an SSH tunnel)", addr, TokenEnv)
	}
	if token != "" && len(token) < 16 {
		return nil, fmt.Errorf("%s is %d characters: use 16 or more (for instance: openssl rand -hex 24)", TokenEnv, len(token))
	}
	return net.Listen("tcp", addr)
}

// Serve serves on l until ctx ends, then shuts down within 5 s.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	err := srv.Serve(l)
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// authenticate requires the token when one is set. Without a token (a
// loopback listener), it requires a loopback Host header, so that a page
// of another site cannot reach the dashboard through DNS rebinding.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.o.Token == "" {
			host, _, err := net.SplitHostPort(r.Host)
			if err != nil {
				host = r.Host
			}
			if !isLoopbackHost(strings.Trim(host, "[]")) {
				http.Error(w, "this dashboard answers to localhost, 127.0.0.1 and [::1] only", http.StatusMisdirectedRequest)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if t := r.URL.Query().Get("token"); t != "" && r.Method == http.MethodGet && r.URL.Path == "/" {
			if !s.tokenOK(t) {
				http.Error(w, "wrong token", http.StatusUnauthorized)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: cookieName, Value: t, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		got := ""
		if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Bearer ") {
			got = strings.TrimPrefix(a, "Bearer ")
		} else if c, err := r.Cookie(cookieName); err == nil {
			got = c.Value
		}
		if !s.tokenOK(got) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="hpcq"`)
			http.Error(w, "this dashboard needs its token: open /?token=... once, or send Authorization: Bearer ...", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

const cookieName = "hpcq_token"

func (s *Server) tokenOK(t string) bool {
	return t != "" && subtle.ConstantTimeCompare([]byte(t), []byte(s.o.Token)) == 1
}

// runDirs lists the runs served, newest first, by id.
func (s *Server) runDirs() ([]string, error) {
	if s.o.RunDir != "" {
		return []string{s.o.RunDir}, nil
	}
	entries, err := os.ReadDir(s.o.RunsDir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		d := filepath.Join(s.o.RunsDir, e.Name())
		if _, err := os.Stat(rundir.Dir(d).Path(rundir.InfoFile)); err == nil {
			out = append(out, d)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(out)))
	return out, nil
}

// errNoRun: the id names no run served.
var errNoRun = errors.New("no such run")

// runRef is a run served: its directory, or "" for a run only the
// archive knows.
type runRef struct{ id, dir string }

func (r runRef) archived() bool { return r.dir == "" }

// find finds run id: among the directories served, else in the archive.
func (s *Server) find(ctx context.Context, id string) (runRef, error) {
	dir, err := s.runDir(id)
	if err == nil || s.o.Archive == nil || !errors.Is(err, errNoRun) || schema.CheckID("run id", id, true) != nil {
		return runRef{id: id, dir: dir}, err
	}
	tab, qerr := s.o.Archive(ctx, "SELECT count() FROM runs FINAL WHERE run = "+quote(id))
	if qerr != nil {
		return runRef{}, qerr
	}
	if len(tab.Rows) == 0 || toFloat(tab.Rows[0][0]) == 0 {
		return runRef{}, err
	}
	return runRef{id: id}, nil
}

// runDir finds the directory of run id among those served.
func (s *Server) runDir(id string) (string, error) {
	if err := schema.CheckID("run id", id, true); err != nil {
		return "", fmt.Errorf("%w: %v", errNoRun, err)
	}
	if s.o.RunDir != "" {
		if rundir.Dir(s.o.RunDir).ID() == id {
			return s.o.RunDir, nil
		}
		return "", fmt.Errorf("%w: %s", errNoRun, id)
	}
	d := filepath.Join(s.o.RunsDir, id)
	if _, err := os.Stat(rundir.Dir(d).Path(rundir.InfoFile)); err != nil {
		return "", fmt.Errorf("%w: %s", errNoRun, id)
	}
	return d, nil
}

// Counts are the runs the server shows by status and their nodes by
// status (runview's words), for its /metrics: what `scheduler serve`
// serves, at a glance, with no run or node id in a label.
func (s *Server) Counts() (runs, nodes map[string]int, err error) {
	dirs, err := s.runDirs()
	if err != nil {
		return nil, nil, err
	}
	runs, nodes = map[string]int{}, map[string]int{}
	for _, d := range dirs {
		runs[s.summary(d).Status]++
		lines, err := runview.ListNodes(d)
		if err != nil {
			continue // the run's summary says what cannot be read
		}
		for _, l := range lines {
			nodes[l.Status]++
		}
	}
	return runs, nodes, nil
}
