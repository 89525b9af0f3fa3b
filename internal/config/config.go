// Package config reads hpcq's settings: defaults, then HPCQ_* environment
// variables (through envconfig), then command-line flags.
package config

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/redis/go-redis/v9"

	"github.com/hpcq/hpcq/pkg/queue"
)

// Prefix of every environment variable.
const Prefix = "HPCQ"

// NATS is how to reach an external server. Empty URL means local mode.
type NATS struct {
	URL       string `envconfig:"NATS_URL" desc:"NATS server URL(s); empty: local mode with an embedded server"`
	User      string `envconfig:"NATS_USER" desc:"NATS user"`
	Password  string `envconfig:"NATS_PASSWORD" desc:"NATS password"`
	Token     string `envconfig:"NATS_TOKEN" desc:"NATS token"`
	NKeyFile  string `envconfig:"NATS_NKEY_FILE" desc:"file with an nkey seed"`
	CredsFile string `envconfig:"NATS_CREDS_FILE" desc:"JWT credentials file"`
	TLSCA     string `envconfig:"NATS_TLS_CA" desc:"PEM file of CAs to trust"`
	TLSCert   string `envconfig:"NATS_TLS_CERT" desc:"client certificate (PEM)"`
	TLSKey    string `envconfig:"NATS_TLS_KEY" desc:"client key (PEM)"`
}

// Conn is the connection config for pkg/queue.
func (n NATS) Conn(name string) queue.ConnConfig {
	return queue.ConnConfig{URL: n.URL, Name: name, User: n.User, Password: n.Password, Token: n.Token,
		NKeyFile: n.NKeyFile, CredsFile: n.CredsFile, TLSCA: n.TLSCA, TLSCert: n.TLSCert, TLSKey: n.TLSKey}
}

// Queue settings, shared by every process of a cluster.
type Queue struct {
	AckWait     time.Duration `envconfig:"ACK_WAIT" default:"60s" desc:"redeliver a task not acknowledged or heartbeated within this"`
	MaxDeliver  int           `envconfig:"MAX_DELIVER" default:"5" desc:"dead-letter a task after this many deliveries"`
	DedupWindow time.Duration `envconfig:"DEDUP_WINDOW" default:"10m" desc:"server-side duplicate detection window"`
	Heartbeat   time.Duration `envconfig:"HEARTBEAT" default:"5s" desc:"worker registry heartbeat period"`
	Replicas    int           `envconfig:"NATS_REPLICAS" default:"1" desc:"replicas of the streams and buckets (3 on a NATS cluster of 3)"`
	// ArtifactsMaxAge is the retention of the artifacts object store.
	ArtifactsMaxAge time.Duration `envconfig:"ARTIFACTS_MAX_AGE" default:"168h" desc:"how long the object store keeps the logs, outputs and plots workers uploaded"`
	// LayersMaxMB bounds the object store of container layers.
	LayersMaxMB int64 `envconfig:"LAYERS_MAX_MB" default:"8192" desc:"bound of the object store of the container layers nodes leave (what Phase 1 installed), shared between workers"`
}

// Options for pkg/queue.
func (q Queue) Options() queue.Options {
	return queue.Options{AckWait: q.AckWait, MaxDeliver: q.MaxDeliver, DedupWindow: q.DedupWindow, HeartbeatPeriod: q.Heartbeat, Replicas: q.Replicas,
		ArtifactsMaxAge: q.ArtifactsMaxAge, LayersMaxBytes: q.LayersMaxMB << 20}
}

// Log settings.
type Log struct {
	Level  string `envconfig:"LOG_LEVEL" default:"info" desc:"debug, info, warn or error"`
	Format string `envconfig:"LOG_FORMAT" default:"text" desc:"text or json"`
}

// Logger builds the logger the settings describe, writing to w, and routes
// the log lines of the libraries that print their own (go-redis) through
// it, so that a process writes one log format to one place.
func (l Log) Logger(w io.Writer) (*slog.Logger, error) {
	log, err := l.logger(w)
	if err == nil {
		redis.SetLogger(redisLogger{log})
	}
	return log, err
}

// redisLogger passes go-redis's lines on as warnings.
type redisLogger struct{ log *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	r.log.WarnContext(ctx, strings.TrimSpace(fmt.Sprintf(format, v...)), "lib", "go-redis")
}

func (l Log) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.Level)); err != nil {
		return nil, fmt.Errorf("log level %q: %w", l.Level, err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(l.Format) {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: must be text or json", l.Format)
}

// Store is where a cluster run keeps its memory and results. With neither
// set, a run keeps them in the SQLite file of its run directory.
type Store struct {
	RedisURL      string `envconfig:"REDIS_URL" desc:"Redis for memory branches, core and recall: redis://[user:password@]host:port/db, rediss:// for TLS"`
	RedisPassword string `envconfig:"REDIS_PASSWORD" desc:"Redis AUTH password (instead of one in the URL)"`
	RedisTLSCA    string `envconfig:"REDIS_TLS_CA" desc:"PEM file of CAs to trust for rediss://"`
	ClickHouseDSN string `envconfig:"CLICKHOUSE_DSN" desc:"ClickHouse for archival memory and results: clickhouse://user:password@host:9000/database[?secure=true]"`
	// ClickHousePassword, when set, is the DSN's password (the DSN then
	// names only the user).
	ClickHousePassword string `envconfig:"CLICKHOUSE_PASSWORD" desc:"ClickHouse password (instead of one in the DSN)"`
	SpoolDir           string `envconfig:"SPOOL_DIR" default:"hpcq-spool" desc:"local spool of writes not yet in Redis or ClickHouse"`
}

// Isolation is how workers isolate the commands of their tasks.
type Isolation struct {
	Mode string `envconfig:"ISOLATION" default:"auto" desc:"auto (namespaces where the machine allows them), required (fail at start without) or off"`
	User string `envconfig:"SANDBOX_USER" default:"nobody" desc:"user task commands run as when the worker runs as root"`
	// UIDs gives each slot a uid of its own (FIRST-LAST, ids no account
	// uses), for a worker running as root.
	UIDs     string   `envconfig:"SANDBOX_UIDS" desc:"FIRST-LAST: a uid (and group) of its own per slot, ids no account uses, for a worker running as root; RLIMIT_NPROC then limits a task's processes where no pids cgroup can (default: every task as HPCQ_SANDBOX_USER)"`
	Writable []string `envconfig:"SANDBOX_WRITABLE" desc:"directories besides the workspace that task commands may write (absolute paths)"`
	// Pids bounds a task's processes and threads when it sets no
	// limits.pids.
	Pids int `envconfig:"TASK_PIDS" desc:"processes and threads a task may have at once (cgroup pids.max) when it sets no limits.pids (default: 1024, or 32 per core of the node if more)"`
	// DiskMB bounds a task's workspace on disk when it sets no
	// limits.disk_mb.
	DiskMB int `envconfig:"TASK_DISK_MB" desc:"megabytes a task's workspace may hold on disk while it runs when it sets no limits.disk_mb (default: no bound)"`
	// TmpMB bounds a command's private /tmp, /var/tmp and /dev/shm
	// together (one tmpfs, in RAM) when its task sets no memory limit.
	TmpMB int `envconfig:"SANDBOX_TMP_MB" default:"1024" desc:"size of a task command's private /tmp, /var/tmp and /dev/shm together (one tmpfs) when the task sets no limits.memory_mb"`
}

// Common settings of every command.
type Common struct {
	NATS
	Queue
	Log
	Store
}

// Worker settings of a worker process.
type Worker struct {
	Common
	Pools   []string `envconfig:"POOLS" default:"cpu" desc:"pools to pull tasks from"`
	WorkDir string   `envconfig:"WORK_DIR" default:"hpcq-work" desc:"directory of workspaces and phase logs"`
	ID      string   `envconfig:"WORKER_ID" desc:"registry id (default: host-pid-n)"`
	// MetricsAddr serves Prometheus metrics at /metrics (host:port).
	MetricsAddr string `envconfig:"METRICS_ADDR" desc:"serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9464; empty: off)"`
	Tasks
}

// Tasks are how a worker runs tasks: the settings a worker process and the
// in-process workers of a local run read alike.
type Tasks struct {
	Slots    int           `envconfig:"SLOTS" desc:"tasks run at once per worker (default: cores)"`
	Grace    time.Duration `envconfig:"KILL_GRACE" default:"5s" desc:"SIGTERM to SIGKILL grace for commands"`
	FetchMax time.Duration `envconfig:"FETCH_WAIT" default:"1s" desc:"how long one pull request waits"`
	IdleExit time.Duration `envconfig:"IDLE_EXIT" desc:"exit after this long with nothing to do (0: never)"`
	// MaxOutput is kept in memory per output stream of a phase, unless the
	// task sets limits.max_output_bytes.
	MaxOutput int64 `envconfig:"MAX_OUTPUT_BYTES" default:"8388608" desc:"output kept in memory per stream of a phase"`
	// Shell is plain (bash -c in the login environment captured once at
	// start) or login (bash -lc per command).
	Shell string `envconfig:"TASK_SHELL" default:"plain" desc:"plain (bash -c in the login environment captured once at start) or login (a login shell per command)"`
	// Caps on what one task brings home through the object store.
	ArtifactFileMax int64 `envconfig:"ARTIFACT_FILE_BYTES" default:"16777216" desc:"largest log, output or plot a task uploads (a log is cut to it)"`
	ArtifactNodeMax int64 `envconfig:"ARTIFACT_NODE_BYTES" default:"67108864" desc:"most bytes one task attempt uploads in all"`
	// FinishTimeout bounds what follows a task's last phase: its outputs
	// and metrics read, its plots looked for, its files uploaded.
	FinishTimeout time.Duration `envconfig:"TASK_FINISH_TIMEOUT" default:"5m" desc:"longest a task's slot is held after its last phase (outputs, metrics, plots, uploads); what is left then is said in the result"`
	// ImageCache keeps the container images tasks name, unpacked, on
	// node-local disk.
	ImageCache   string `envconfig:"IMAGE_CACHE" desc:"directory of the container images tasks name, unpacked once per digest (node-local disk; default: the work directory's .images)"`
	ImageCacheMB int    `envconfig:"IMAGE_CACHE_MB" default:"20480" desc:"bound of the unpacked images and kept layers; the least recently used go first (0: none)"`
	// ImageDirs are the site's image directories.
	ImageDirs []string `envconfig:"IMAGE_DIRS" desc:"the site's image directories (comma-separated absolute paths): a directory image must lie under one; an image file elsewhere is used only when the task's user may read it; never / nor a system directory"`
	// LayerShareMB is the largest layer a worker sends other workers.
	LayerShareMB int `envconfig:"LAYER_SHARE_MB" default:"1024" desc:"largest container layer (what a node installed over its image) put in the object store for the workers of its children; a larger one stays on its worker, and a child run elsewhere installs again"`
	// GPUMPS is how tasks that share a GPU use NVIDIA MPS.
	// NodeExclusive: the worker's allocation holds its node alone (a Slurm
	// job with --exclusive: slurm-bridge's exclusive queues set it).
	NodeExclusive bool   `envconfig:"WORKER_NODE_EXCLUSIVE" desc:"the worker's allocation holds its node alone (an exclusive Slurm job; slurm-bridge sets it for a queue with exclusive: true): exclusive tasks say exclusive=node"`
	GPUMPS        string `envconfig:"GPU_MPS" default:"auto" desc:"tasks sharing a GPU (limits.gpus below 1) run under the site's MPS daemon: auto (its pipe directory, CUDA_MPS_PIPE_DIRECTORY or /tmp/nvidia-mps, when its control pipe is there), off (they take turns on the device), or the pipe directory"`
	Isolation
}

// LLM settings: the model the scheduler asks. Only the scheduler's process
// holds the key; workers ask through the NATS gateway.
type LLM struct {
	// The OpenAI variables keep their usual names (no HPCQ_ prefix).
	APIKey  string `envconfig:"OPENAI_API_KEY" ignored:"true"`
	BaseURL string `envconfig:"OPENAI_BASE_URL" ignored:"true"`
	Model   string `envconfig:"LLM_MODEL" desc:"model name for an OpenAI-compatible endpoint (OPENAI_BASE_URL, OPENAI_API_KEY)"`
	// Replay: a cassette to serve replies from instead of a live model.
	Replay      string        `envconfig:"LLM_REPLAY" desc:"JSONL cassette of recorded replies: offline, deterministic runs"`
	Record      string        `envconfig:"LLM_RECORD" desc:"append every live exchange to this JSONL cassette"`
	Cache       string        `envconfig:"LLM_CACHE" desc:"a directory of LLM replies shared between runs, besides each run's llm-cache/ (requests at temperature 0, or all with llm.cache: true)"`
	Reasoning   string        `envconfig:"LLM_REASONING" desc:"true or false: the model is (or is not) a reasoning model, whatever its name and run.yaml's llm.reasoning say"`
	Endpoint    string        `envconfig:"LLM_ENDPOINT" default:"auto" desc:"kind of endpoint: auto (told from OPENAI_BASE_URL), openai, azure, vllm, ollama, llamacpp, proxy or compatible"`
	APIVersion  string        `envconfig:"LLM_API_VERSION" desc:"Azure OpenAI's api-version (default 2024-10-21; 2024-12-01-preview for a reasoning model)"`
	Serves      string        `envconfig:"LLM_SERVES" desc:"the model an Azure deployment (HPCQ_LLM_MODEL names the deployment) serves, for its price in llm.prices: gpt-4o"`
	Stream      bool          `envconfig:"LLM_STREAM" default:"true" desc:"stream replies (chunks read as they come; false: whole replies)"`
	IdleTimeout time.Duration `envconfig:"LLM_IDLE_TIMEOUT" default:"90s" desc:"longest wait for the next chunk of a streamed reply"`
	Timeout     time.Duration `envconfig:"LLM_TIMEOUT" default:"20m" desc:"cap of one request attempt, streamed or not (not retried when reached)"`
	MaxAttempts int           `envconfig:"LLM_MAX_ATTEMPTS" default:"5" desc:"attempts per request (429, 5xx, timeouts are retried)"`
	Concurrency int           `envconfig:"LLM_CONCURRENCY" default:"4" desc:"requests in flight at once"`
}

// LoadLLM reads the LLM settings, the OpenAI variables included.
func LoadLLM() (LLM, error) {
	var l LLM
	if err := Load(&l); err != nil {
		return l, err
	}
	l.APIKey, l.BaseURL = os.Getenv("OPENAI_API_KEY"), os.Getenv("OPENAI_BASE_URL")
	return l, nil
}

// Scheduler settings.
type Scheduler struct {
	Common
	RunsDir string `envconfig:"RUNS_DIR" default:"runs" desc:"directory of run directories"`
	Workers int    `envconfig:"LOCAL_WORKERS" default:"1" desc:"in-process workers in local mode"`
	// OutageMax bounds how long a run waits for its memory store's servers.
	OutageMax time.Duration `envconfig:"OUTAGE_MAX" default:"10m" desc:"how long a run holds its nodes while Redis or ClickHouse is unreachable before it ends as interrupted (resumable)"`
	// Tasks configure the in-process workers of local mode, as they do a
	// worker process.
	Tasks
	// Memory overrides run.yaml's memory block; the seed's flags set it
	// too (flags over environment over run.yaml).
	Memory
}

// Memory settings of a run given outside run.yaml. Nil: run.yaml's.
type Memory struct {
	MemoryEnabled  *bool   `envconfig:"MEMORY_ENABLED" desc:"memory on or off, over run.yaml's memory.enabled (flag --enable_memgpt)"`
	MemoryDB       *string `envconfig:"MEMORY_DB" desc:"the SQLite memory file, over memory.db_path (flag --memory_db)"`
	MemoryCoreMax  *int    `envconfig:"MEMORY_CORE_MAX_CHARS" desc:"over memory.core_max_chars (flag --memory_core_max_chars)"`
	MemoryRecall   *int    `envconfig:"MEMORY_RECALL_MAX_EVENTS" desc:"over memory.recall_max_events (flag --memory_recall_max_events)"`
	MemoryK        *int    `envconfig:"MEMORY_RETRIEVAL_K" desc:"over memory.retrieval_k (flag --memory_retrieval_k)"`
	MemoryCompress *int    `envconfig:"MEMORY_MAX_COMPRESSION_ITERATIONS" desc:"over memory.max_compression_iterations (flag --memory_max_compression_iterations)"`
}

// AddMemoryFlags binds the seed's memory flags to m: set, a flag wins over
// the environment.
func AddMemoryFlags(fs *flag.FlagSet, m *Memory) {
	fs.Var(optBool{&m.MemoryEnabled}, "enable_memgpt", "turn the memory on (--enable_memgpt=false: off), over run.yaml and HPCQ_MEMORY_ENABLED")
	fs.Var(optString{&m.MemoryDB}, "memory_db", "the SQLite memory file (default RUN_DIR/memory/memory.sqlite), over memory.db_path and HPCQ_MEMORY_DB")
	fs.Var(optInt{&m.MemoryCoreMax}, "memory_core_max_chars", "core memory limit, over memory.core_max_chars")
	fs.Var(optInt{&m.MemoryRecall}, "memory_recall_max_events", "recall window, over memory.recall_max_events")
	fs.Var(optInt{&m.MemoryK}, "memory_retrieval_k", "archival hits per search, over memory.retrieval_k")
	fs.Var(optInt{&m.MemoryCompress}, "memory_max_compression_iterations", "compression rounds, over memory.max_compression_iterations")
}

// Flags whose unset state is nil.
type (
	optBool   struct{ p **bool }
	optString struct{ p **string }
	optInt    struct{ p **int }
)

func (o optBool) IsBoolFlag() bool { return true }
func (o optBool) String() string {
	if o.p == nil || *o.p == nil {
		return ""
	}
	return strconv.FormatBool(**o.p)
}
func (o optBool) Set(v string) error {
	b, err := strconv.ParseBool(v)
	if err == nil {
		*o.p = &b
	}
	return err
}
func (o optString) String() string {
	if o.p == nil || *o.p == nil {
		return ""
	}
	return **o.p
}
func (o optString) Set(v string) error {
	if v == "" {
		return errors.New("must not be empty")
	}
	*o.p = &v
	return nil
}
func (o optInt) String() string {
	if o.p == nil || *o.p == nil {
		return ""
	}
	return strconv.Itoa(**o.p)
}
func (o optInt) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err == nil && n <= 0 {
		err = errors.New("must be positive")
	}
	if err == nil {
		*o.p = &n
	}
	return err
}

// Load fills cfg from defaults and the environment. For the settings of
// Common, the secrets may come from files instead (secretFiles), and a
// ClickHouse password joins the DSN.
func Load(cfg any) error {
	if err := envconfig.Process(Prefix, cfg); err != nil {
		return fmt.Errorf("environment: %w", err)
	}
	if c, ok := cfg.(interface{ common() *Common }); ok {
		return c.common().readSecrets()
	}
	return nil
}

func (c *Common) common() *Common { return c }

// secretFiles are the variables naming a file that holds a secret, the
// variable each stands for, and the setting it fills. The file must be
// readable by its owner only (mode 600 or 400); a trailing newline is
// dropped. Setting both a variable and its file is an error.
var secretFiles = []struct {
	File, Var string
	field     func(*Common) *string
}{
	{"HPCQ_NATS_PASSWORD_FILE", "HPCQ_NATS_PASSWORD", func(c *Common) *string { return &c.NATS.Password }},
	{"HPCQ_NATS_TOKEN_FILE", "HPCQ_NATS_TOKEN", func(c *Common) *string { return &c.NATS.Token }},
	{"HPCQ_REDIS_PASSWORD_FILE", "HPCQ_REDIS_PASSWORD", func(c *Common) *string { return &c.Store.RedisPassword }},
	{"HPCQ_CLICKHOUSE_PASSWORD_FILE", "HPCQ_CLICKHOUSE_PASSWORD", func(c *Common) *string { return &c.Store.ClickHousePassword }},
}

func (c *Common) readSecrets() error {
	for _, f := range secretFiles {
		path := os.Getenv(f.File)
		if path == "" {
			continue
		}
		if os.Getenv(f.Var) != "" {
			return fmt.Errorf("environment: %s and %s are both set: use one", f.Var, f.File)
		}
		v, err := ReadSecretFile(path)
		if err != nil {
			return fmt.Errorf("environment: %s: %w", f.File, err)
		}
		*f.field(c) = v
	}
	dsn, err := withPassword(c.Store.ClickHouseDSN, c.Store.ClickHousePassword)
	if err != nil {
		return fmt.Errorf("environment: HPCQ_CLICKHOUSE_DSN: %w", err)
	}
	c.Store.ClickHouseDSN = dsn
	return nil
}

// ReadSecretFile reads a secret from path, which only its owner may read.
func ReadSecretFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("%s has mode %04o: other users may read it; chmod 600 %s", path, perm, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return "", err
	}
	v := strings.TrimRight(string(data), "\r\n")
	if v == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return v, nil
}

// withPassword puts password into dsn's user info (keeping its user, or
// "default"); an empty password leaves dsn as it is.
func withPassword(dsn, password string) (string, error) {
	if password == "" || dsn == "" {
		return dsn, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("not a URL: %s", RedactURL(dsn))
	}
	user := "default"
	if u.User != nil {
		if _, set := u.User.Password(); set {
			return "", errors.New("holds a password and HPCQ_CLICKHOUSE_PASSWORD is set too: use one")
		}
		if u.User.Username() != "" {
			user = u.User.Username()
		}
	}
	u.User = url.UserPassword(user, password)
	return u.String(), nil
}

// dsnFlag sets the ClickHouse DSN, adding the password from the
// environment as Load does.
type dsnFlag struct{ s *Store }

func (f dsnFlag) String() string {
	if f.s == nil {
		return ""
	}
	return RedactURL(f.s.ClickHouseDSN)
}

func (f dsnFlag) Set(v string) error {
	dsn, err := withPassword(v, f.s.ClickHousePassword)
	if err == nil {
		f.s.ClickHouseDSN = dsn
	}
	return err
}

// Usage prints the environment variables cfg reads.
func Usage(w io.Writer, cfg any) {
	_ = envconfig.Usagef(Prefix, cfg, w, envconfig.DefaultTableFormat)
}

// AddCommonFlags binds flags to c, with the values read so far as defaults,
// so that a flag overrides the environment.
func AddCommonFlags(fs *flag.FlagSet, c *Common) {
	fs.StringVar(&c.NATS.URL, "nats-url", c.NATS.URL, Help(c, &c.NATS.URL, "NATS server URL; empty: local mode"))
	fs.StringVar(&c.NATS.CredsFile, "nats-creds", c.NATS.CredsFile, Help(c, &c.NATS.CredsFile, "NATS credentials file"))
	fs.StringVar(&c.NATS.NKeyFile, "nats-nkey", c.NATS.NKeyFile, Help(c, &c.NATS.NKeyFile, "NATS nkey seed file"))
	fs.StringVar(&c.NATS.TLSCA, "nats-tls-ca", c.NATS.TLSCA, Help(c, &c.NATS.TLSCA, "PEM CA file"))
	fs.DurationVar(&c.Queue.AckWait, "ack-wait", c.Queue.AckWait, Help(c, &c.Queue.AckWait, "AckWait of task deliveries"))
	fs.IntVar(&c.Queue.MaxDeliver, "max-deliver", c.Queue.MaxDeliver, Help(c, &c.Queue.MaxDeliver, "deliveries before dead-lettering"))
	fs.Var(dsnFlag{&c.Store}, "clickhouse-dsn", Help(c, &c.Store.ClickHouseDSN, "ClickHouse for results and archival memory"))
	fs.StringVar(&c.Store.RedisURL, "redis-url", c.Store.RedisURL, Help(c, &c.Store.RedisURL, "Redis for memory"))
	fs.StringVar(&c.Log.Level, "log-level", c.Log.Level, Help(c, &c.Log.Level, "debug, info, warn, error"))
	fs.StringVar(&c.Log.Format, "log-format", c.Log.Format, Help(c, &c.Log.Format, "text or json"))
}

// ListFlag is a comma-separated list flag.
type ListFlag struct{ P *[]string }

func (l ListFlag) String() string {
	if l.P == nil {
		return ""
	}
	return strings.Join(*l.P, ",")
}

// Set splits v on commas, dropping empty items.
func (l ListFlag) Set(v string) error {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	*l.P = out
	return nil
}

// RedactURL drops credentials (user:password@) from each URL of a
// comma-separated list, for logs and run records.
func RedactURL(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			u.User = nil
			parts[i] = u.String()
		}
	}
	return strings.Join(parts, ",")
}

// Secrets are the values of the scheduler's settings that no page, answer
// or log may show: the model's API key, the NATS, Redis and ClickHouse
// passwords and tokens (also those inside their URLs).
func (c *Scheduler) Secrets() []string {
	out := []string{os.Getenv("OPENAI_API_KEY"), c.NATS.Password, c.NATS.Token, c.Store.RedisPassword, c.Store.ClickHousePassword}
	for _, u := range append(strings.Split(c.NATS.URL, ","), c.Store.RedisURL, c.Store.ClickHouseDSN) {
		if pu, err := url.Parse(strings.TrimSpace(u)); err == nil && pu.User != nil {
			if p, ok := pu.User.Password(); ok {
				out = append(out, p)
			}
		}
	}
	return out
}

// Stderr is where commands log.
var Stderr io.Writer = os.Stderr
