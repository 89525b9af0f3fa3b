package bridge

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/hpcq/hpcq/pkg/schema"
)

// Config is bridge.yaml.
type Config struct {
	// Name tells this bridge's jobs apart from anyone else's: jobs are named
	// <name>-<pool> and carry the comment hpcq-bridge:<name> [hpcq].
	Name string `yaml:"name"`
	// Interval between two looks at the queue [5s].
	Interval time.Duration `yaml:"interval"`
	// PauseAfter consecutive failed submissions pause a queue [3].
	PauseAfter int `yaml:"pause_after"`
	// WorkerBin is the worker binary the jobs run [the worker beside the
	// bridge's own binary].
	WorkerBin string `yaml:"worker_bin"`
	// LogDir receives the jobs' output files [slurm-logs].
	LogDir string `yaml:"log_dir"`
	// SbatchTimeout bounds one sbatch or squeue call [30s].
	SbatchTimeout time.Duration `yaml:"sbatch_timeout"`
	// ServerGoneExit: the NATS server away this long (a scheduler job's
	// server ends with its job), the bridge stops and cancels its jobs,
	// running ones too: their workers have nothing to serve [5m; a
	// negative value waits for it without end, quietly].
	ServerGoneExit time.Duration `yaml:"server_gone_exit"`
	// Queues are the allocation queues, one per pool.
	Queues map[string]*Queue `yaml:"queues"`
}

// Queue is how the workers of one pool are allocated.
type Queue struct {
	Partition string `yaml:"partition"`
	Account   string `yaml:"account"`
	QOS       string `yaml:"qos"`
	// TimeLimit in Slurm's format (minutes, MM:SS, HH:MM:SS, D-HH:MM:SS).
	TimeLimit   string `yaml:"time_limit"`
	CPUsPerTask int    `yaml:"cpus_per_task"`
	// Nodes of each job (its worker runs on the first and takes the tasks
	// of up to that many nodes, limits.nodes; the others run their ranks)
	// [1]. cpus_per_task is then each node's.
	Nodes     int      `yaml:"nodes"`
	GPUs      int      `yaml:"gpus"`
	Gres      string   `yaml:"gres"` // e.g. gpu:a100:2; wins over gpus
	ExtraArgs []string `yaml:"extra_args"`
	// Exclusive jobs hold their nodes alone (sbatch --exclusive): an
	// exclusive task (run.yaml evaluation.exclusive) then runs with no
	// other job on its node, and its result says exclusive=node.
	Exclusive bool `yaml:"exclusive"`
	// Slots of each worker [cpus_per_task, or 1].
	Slots int `yaml:"slots"`
	// MaxJobs of this queue at once, pending and running [4].
	MaxJobs int `yaml:"max_jobs"`
	// Backlog is how many of its jobs may wait in Slurm at once [1].
	Backlog int `yaml:"backlog"`
	// IdleTimeout: a worker with nothing to do this long exits [2m].
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// SignalGrace: the job asks for SIGTERM this long before its time
	// limit, so that its worker hands tasks back and exits [60s].
	SignalGrace time.Duration `yaml:"signal_grace"`
	// Template is the sbatch script template
	// [deploy/slurm/worker.sbatch.tmpl, embedded].
	Template string `yaml:"template"`
}

// ErrConfig: bridge.yaml is invalid; the message names the field.
var ErrConfig = errors.New("bridge config")

// LoadConfig reads bridge.yaml (unknown keys are errors), applies the
// environment's overrides (HPCQ_BRIDGE_<POOL>_<FIELD>, e.g.
// HPCQ_BRIDGE_CPU_PARTITION, HPCQ_BRIDGE_GPU_MAX_JOBS) and the defaults,
// and checks it.
func LoadConfig(path string, getenv func(string) string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	c := &Config{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrConfig, path, err)
	}
	if err := c.applyEnv(getenv); err != nil {
		return nil, err
	}
	for _, q := range c.Queues {
		if q != nil && q.Template != "" && !filepath.IsAbs(q.Template) {
			q.Template = filepath.Join(filepath.Dir(path), q.Template)
		}
	}
	c.defaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

func (c *Config) applyEnv(getenv func(string) string) error {
	// The bridge's own fields: a site's job script sets them, no copy of
	// bridge.yaml to edit.
	for field, set := range map[string]func(string) error{
		"WORKER_BIN":       func(v string) error { c.WorkerBin = v; return nil },
		"LOG_DIR":          func(v string) error { c.LogDir = v; return nil },
		"NAME":             func(v string) error { c.Name = v; return nil },
		"SERVER_GONE_EXIT": func(v string) (err error) { c.ServerGoneExit, err = time.ParseDuration(v); return },
	} {
		if v := getenv("HPCQ_BRIDGE_" + field); v != "" {
			if err := set(v); err != nil {
				return fmt.Errorf("%w: HPCQ_BRIDGE_%s=%q: %v", ErrConfig, field, v, err)
			}
		}
	}
	for pool, q := range c.Queues {
		if q == nil {
			q = &Queue{}
			c.Queues[pool] = q
		}
		prefix := "HPCQ_BRIDGE_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(pool)) + "_"
		for field, set := range map[string]func(string) error{
			"PARTITION":  func(v string) error { q.Partition = v; return nil },
			"ACCOUNT":    func(v string) error { q.Account = v; return nil },
			"QOS":        func(v string) error { q.QOS = v; return nil },
			"TIME_LIMIT": func(v string) error { q.TimeLimit = v; return nil },
			"MAX_JOBS":   func(v string) (err error) { q.MaxJobs, err = strconv.Atoi(v); return },
			"BACKLOG":    func(v string) (err error) { q.Backlog, err = strconv.Atoi(v); return },
			"SLOTS":      func(v string) (err error) { q.Slots, err = strconv.Atoi(v); return },
			"NODES":      func(v string) (err error) { q.Nodes, err = strconv.Atoi(v); return },
		} {
			if v := getenv(prefix + field); v != "" {
				if err := set(v); err != nil {
					return fmt.Errorf("%w: %s%s=%q: %v", ErrConfig, prefix, field, v, err)
				}
			}
		}
	}
	return nil
}

func (c *Config) defaults() {
	if c.Name == "" {
		c.Name = "hpcq"
	}
	if c.Interval <= 0 {
		c.Interval = 5 * time.Second
	}
	if c.PauseAfter <= 0 {
		c.PauseAfter = 3
	}
	if c.LogDir == "" {
		c.LogDir = "slurm-logs"
	}
	if c.SbatchTimeout <= 0 {
		c.SbatchTimeout = 30 * time.Second
	}
	if c.ServerGoneExit == 0 {
		c.ServerGoneExit = 5 * time.Minute
	}
	for _, q := range c.Queues {
		if q.Slots <= 0 {
			q.Slots = max(1, q.CPUsPerTask)
			if q.Nodes > 1 {
				q.Slots = 1 // a multi-node task takes the whole allocation
			}
		}
		if q.MaxJobs <= 0 {
			q.MaxJobs = 4
		}
		if q.Backlog <= 0 {
			q.Backlog = 1
		}
		if q.IdleTimeout <= 0 {
			q.IdleTimeout = 2 * time.Minute
		}
		if q.SignalGrace <= 0 {
			q.SignalGrace = 60 * time.Second
		}
	}
}

var (
	nameRe      = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,40}$`)
	timeLimitRe = regexp.MustCompile(`^(\d+-)?\d+(:\d\d){0,2}$`)
	slurmWordRe = regexp.MustCompile(`^[A-Za-z0-9_.:+-]*$`)
)

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrConfig, field, fmt.Sprintf(format, args...))
	}
	if !nameRe.MatchString(c.Name) {
		return bad("name", "%q: letters, digits, '_' and '-', at most 41", c.Name)
	}
	if len(c.Queues) == 0 {
		return bad("queues", "none: give one per pool the bridge should start workers for")
	}
	for _, pool := range c.Pools() {
		q := c.Queues[pool]
		f := "queues." + pool
		if err := schema.ValidatePool(pool); err != nil {
			return bad(f, "%v", err)
		}
		for name, v := range map[string]string{"partition": q.Partition, "account": q.Account, "qos": q.QOS, "gres": q.Gres} {
			if !slurmWordRe.MatchString(v) {
				return bad(f+"."+name, "%q: not a Slurm name", v)
			}
		}
		if q.TimeLimit != "" && !timeLimitRe.MatchString(q.TimeLimit) {
			return bad(f+".time_limit", "%q: minutes, MM:SS, HH:MM:SS or D-HH:MM:SS", q.TimeLimit)
		}
		if q.CPUsPerTask < 0 || q.GPUs < 0 || q.Nodes < 0 || q.Nodes > 4096 {
			return bad(f, "cpus_per_task, gpus and nodes must not be negative (nodes at most 4096)")
		}
		if q.Backlog > q.MaxJobs {
			return bad(f+".backlog", "%d, more than max_jobs %d", q.Backlog, q.MaxJobs)
		}
		for _, a := range q.ExtraArgs {
			if !strings.HasPrefix(a, "--") {
				return bad(f+".extra_args", "%q: one --option=value per entry", a)
			}
		}
		if limit, ok := ParseTimeLimit(q.TimeLimit); ok && limit <= q.SignalGrace {
			return bad(f+".signal_grace", "%v, not shorter than the time limit %s", q.SignalGrace, q.TimeLimit)
		}
	}
	return nil
}

// Pools returns the configured pools, sorted.
func (c *Config) Pools() []string {
	out := make([]string, 0, len(c.Queues))
	for p := range c.Queues {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// ParseTimeLimit reads a Slurm time limit; ok is false for "" or a form
// it does not know.
func ParseTimeLimit(s string) (time.Duration, bool) {
	if s == "" || !timeLimitRe.MatchString(s) {
		return 0, false
	}
	var days int
	if d, rest, ok := strings.Cut(s, "-"); ok {
		days, _ = strconv.Atoi(d)
		s = rest
		// D-HH, D-HH:MM, D-HH:MM:SS
		parts := strings.Split(s, ":")
		var h, m, sec int
		h, _ = strconv.Atoi(parts[0])
		if len(parts) > 1 {
			m, _ = strconv.Atoi(parts[1])
		}
		if len(parts) > 2 {
			sec, _ = strconv.Atoi(parts[2])
		}
		return time.Duration(days)*24*time.Hour + time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(sec)*time.Second, true
	}
	parts := strings.Split(s, ":")
	n := make([]int, len(parts))
	for i, p := range parts {
		n[i], _ = strconv.Atoi(p)
	}
	switch len(n) {
	case 1: // minutes
		return time.Duration(n[0]) * time.Minute, true
	case 2: // MM:SS
		return time.Duration(n[0])*time.Minute + time.Duration(n[1])*time.Second, true
	default: // HH:MM:SS
		return time.Duration(n[0])*time.Hour + time.Duration(n[1])*time.Minute + time.Duration(n[2])*time.Second, true
	}
}
