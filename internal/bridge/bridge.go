package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"text/template"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	slurmfiles "github.com/hpcq/hpcq/deploy/slurm"
	"github.com/hpcq/hpcq/internal/metrics"
	"github.com/hpcq/hpcq/pkg/queue"
)

// PoolStatus is what `slurm-bridge status` shows of a pool.
type PoolStatus struct {
	// Bridge is the bridge's name (set by AllStatuses, not stored).
	Bridge  string `json:"bridge,omitempty"`
	Pool    string `json:"pool"`
	Backlog uint64 `json:"backlog"` // tasks pending + in flight
	Workers int    `json:"workers"` // live workers of the pool
	Pending int    `json:"jobs_pending"`
	Running int    `json:"jobs_running"`
	// Submitted counts the jobs this bridge submitted for the pool.
	Submitted int  `json:"submitted"`
	Paused    bool `json:"paused"`
	// PausedReason says why the queue is paused (kept until it resumes).
	PausedReason string `json:"paused_reason,omitempty"`
	LastError    string `json:"last_error,omitempty"`
	// Failures in a row of sbatch for this pool.
	Failures int `json:"failures"`
	// NoQueue: tasks wait in a pool no allocation queue serves.
	NoQueue bool      `json:"no_queue,omitempty"`
	Updated time.Time `json:"updated"`
	// Stale: the pool is no longer in the bridge's configuration (set by
	// Statuses from the configuration it is given, not stored).
	Stale bool `json:"stale,omitempty"`
}

// Bridge starts workers as Slurm jobs when a pool's backlog needs them.
type Bridge struct {
	q     *queue.Queue
	slurm Slurm
	log   *slog.Logger
	kv    jetstream.KeyValue

	mu      sync.Mutex
	cfg     *Config
	scripts map[string]string // pool -> rendered script
	status  map[string]*PoolStatus
	jobs    map[string]string // job id -> pool: every job this bridge submitted and saw alive
	// Metrics, when set before Run, records jobs, backlogs, submissions
	// (slurm-bridge --metrics-addr).
	Metrics *metrics.Bridge
}

// New opens the bridge's state and renders its job scripts.
func New(ctx context.Context, q *queue.Queue, cfg *Config, log *slog.Logger) (*Bridge, error) {
	if log == nil {
		log = slog.Default()
	}
	env, err := JobEnv(os.Environ())
	if err != nil {
		return nil, err
	}
	kv, err := q.BridgeState(ctx, true)
	if err != nil {
		return nil, fmt.Errorf("bridge: state: %w", err)
	}
	b := &Bridge{q: q, slurm: Slurm{Timeout: cfg.SbatchTimeout, Env: env}, log: log.With("bridge", cfg.Name), kv: kv,
		status: map[string]*PoolStatus{}, jobs: map[string]string{}}
	if e, err := kv.Get(ctx, cfg.Name+".jobs"); err == nil {
		if err := json.Unmarshal(e.Value(), &b.jobs); err != nil {
			return nil, fmt.Errorf("bridge: state %s.jobs: %w", cfg.Name, err)
		}
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("bridge: state: %w", err)
	}
	for _, p := range cfg.Pools() {
		if e, err := kv.Get(ctx, cfg.Name+".status."+p); err == nil {
			var st PoolStatus
			if json.Unmarshal(e.Value(), &st) == nil {
				// A restart takes the configuration anew, as a reload does:
				// the dry run pauses what still fails.
				st.Paused, st.PausedReason, st.Failures, st.LastError = false, "", 0, ""
				b.status[p] = &st
			}
		}
	}
	if err := b.setConfig(cfg); err != nil {
		return nil, err
	}
	return b, nil
}

// Script is the data of the job template.
type Script struct {
	JobName, Comment, LogDir                 string
	Pool                                     string
	Partition, Account, QOS, TimeLimit, Gres string
	CPUsPerTask, Slots, Nodes                int
	SignalGraceS                             int
	IdleTimeout                              time.Duration
	WorkerBin                                string
	ExtraArgs                                []string
	Exclusive                                bool
}

// setConfig checks the whole configuration (worker_bin, every queue's
// job script rendered) before it touches the file system: only then is
// log_dir made and are the scripts written there.
func (b *Bridge) setConfig(cfg *Config) error {
	logDir, err := filepath.Abs(cfg.LogDir)
	if err != nil {
		return err
	}
	bin := cfg.WorkerBin
	if bin == "" {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		bin = filepath.Join(filepath.Dir(self), "worker")
	}
	// Checked here, not when the first job fails on a compute node.
	if fi, err := os.Stat(bin); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		why := "not an executable file"
		if err != nil {
			why = err.Error()
		}
		return fmt.Errorf("%w: worker_bin %s: %s (set worker_bin to the worker binary's path on the compute nodes)", ErrConfig, bin, why)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(bin), "hpcq-sandbox")); err != nil {
		b.log.Warn("no hpcq-sandbox beside the worker binary: workers start their task commands through themselves, about 25 ms more per command",
			"worker_bin", bin)
	}
	rendered := map[string]string{}
	for _, pool := range cfg.Pools() {
		q := cfg.Queues[pool]
		text := slurmfiles.WorkerTemplate
		if q.Template != "" {
			data, err := os.ReadFile(q.Template)
			if err != nil {
				return fmt.Errorf("%w: queues.%s.template: %w", ErrConfig, pool, err)
			}
			text = string(data)
		}
		tmpl, err := template.New(pool).Option("missingkey=error").Parse(text)
		if err != nil {
			return fmt.Errorf("%w: queues.%s.template: %v", ErrConfig, pool, err)
		}
		gres := q.Gres
		if gres == "" && q.GPUs > 0 {
			gres = fmt.Sprintf("gpu:%d", q.GPUs)
		}
		var sb strings.Builder
		if err := tmpl.Execute(&sb, Script{JobName: cfg.Name + "-" + pool, Comment: comment(cfg.Name), LogDir: logDir, Pool: pool,
			Partition: q.Partition, Account: q.Account, QOS: q.QOS, TimeLimit: q.TimeLimit, Gres: gres, CPUsPerTask: q.CPUsPerTask,
			Slots: q.Slots, Nodes: q.Nodes, SignalGraceS: int(q.SignalGrace.Seconds()), IdleTimeout: q.IdleTimeout, WorkerBin: bin, ExtraArgs: q.ExtraArgs,
			Exclusive: q.Exclusive}); err != nil {
			return fmt.Errorf("%w: queues.%s.template: %v", ErrConfig, pool, err)
		}
		rendered[pool] = sb.String()
	}
	if _, err := os.Stat(logDir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(logDir, 0o755); err != nil {
			return fmt.Errorf("%w: log_dir: %w", ErrConfig, err)
		}
		b.log.Info("log_dir created: the worker jobs' output goes there", "log_dir", logDir)
	}
	scripts := map[string]string{}
	for pool, text := range rendered {
		path := filepath.Join(logDir, fmt.Sprintf(".%s-%s.sbatch", cfg.Name, pool))
		if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
			return err
		}
		scripts[pool] = path
	}
	b.mu.Lock()
	b.cfg, b.scripts = cfg, scripts
	for _, p := range cfg.Pools() {
		if b.status[p] == nil {
			b.status[p] = &PoolStatus{Pool: p}
		}
	}
	b.mu.Unlock()
	return nil
}

func comment(name string) string { return "hpcq-bridge:" + name }

// Reload takes a new configuration and resumes every paused queue.
func (b *Bridge) Reload(ctx context.Context, cfg *Config) error {
	if err := b.setConfig(cfg); err != nil {
		return err
	}
	b.mu.Lock()
	for _, st := range b.status {
		st.Paused, st.PausedReason, st.Failures = false, "", 0
	}
	b.mu.Unlock()
	b.log.Info("configuration reloaded; paused queues resume")
	return b.DryRun(ctx)
}

// DryRun checks every queue's request with sbatch --test-only; a queue
// that fails is paused with the error.
func (b *Bridge) DryRun(ctx context.Context) error {
	b.mu.Lock()
	scripts := b.scripts
	pools := b.cfg.Pools()
	b.mu.Unlock()
	var failed []string
	for _, p := range pools {
		if err := b.slurm.TestOnly(ctx, scripts[p]); err != nil {
			b.pause(p, "dry run (sbatch --test-only) failed: "+err.Error())
			failed = append(failed, p)
			continue
		}
		b.log.Info("queue checked", "pool", p)
	}
	b.saveStatus(ctx)
	if len(failed) > 0 {
		return fmt.Errorf("bridge: queues paused after a failed dry run: %s", strings.Join(failed, ", "))
	}
	return nil
}

func (b *Bridge) pause(pool, why string) {
	b.mu.Lock()
	st := b.status[pool]
	st.Paused, st.PausedReason, st.LastError = true, why, why
	b.mu.Unlock()
	b.log.Error("queue paused: fix the configuration, then reload it (SIGHUP) or run `slurm-bridge resume "+pool+"`", "pool", pool, "reason", why)
}

// Resume asks a running bridge (through its state bucket) to resume a
// paused queue.
func Resume(ctx context.Context, q *queue.Queue, name, pool string) error {
	kv, err := q.BridgeState(ctx, false)
	if err != nil {
		return fmt.Errorf("bridge: %w", err)
	}
	_, err = kv.Put(ctx, name+".resume."+pool, []byte(time.Now().UTC().Format(time.RFC3339)))
	return err
}

// Statuses reads what a bridge last recorded, per pool.
func Statuses(ctx context.Context, q *queue.Queue, cfg *Config) ([]PoolStatus, error) {
	all, err := AllStatuses(ctx, q)
	if err != nil {
		return nil, err
	}
	var out []PoolStatus
	for _, st := range all {
		if st.Bridge != cfg.Name {
			continue
		}
		_, configured := cfg.Queues[st.Pool]
		st.Stale = !configured && !st.NoQueue
		out = append(out, st)
	}
	return out, nil
}

// AllStatuses reads what every bridge of the server last recorded, per
// bridge and pool (for a reader without the bridges' configuration: Stale
// is not set).
func AllStatuses(ctx context.Context, q *queue.Queue) ([]PoolStatus, error) {
	kv, err := q.BridgeState(ctx, false)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	var out []PoolStatus
	for k := range keys.Keys() {
		name, _, ok := strings.Cut(k, ".status.")
		if !ok {
			continue
		}
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue
		}
		var st PoolStatus
		if json.Unmarshal(e.Value(), &st) == nil {
			st.Bridge = name
			out = append(out, st)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Bridge+"\x00"+out[i].Pool < out[j].Bridge+"\x00"+out[j].Pool })
	return out, nil
}

// ClearStatus removes the recorded status of a pool of the bridge name
// (a stale one: the bridge no longer serves it).
func ClearStatus(ctx context.Context, q *queue.Queue, name, pool string) error {
	kv, err := q.BridgeState(ctx, false)
	if err != nil {
		return err
	}
	if err := kv.Delete(ctx, name+".status."+pool); err != nil {
		return fmt.Errorf("bridge: clear the status of %s: %w", pool, err)
	}
	return nil
}

// Tick is one look: backlog, workers, the bridge's jobs (one squeue), and
// the submissions needed.
func (b *Bridge) Tick(ctx context.Context) error {
	b.mu.Lock()
	cfg, scripts := b.cfg, b.scripts
	b.mu.Unlock()
	stats, err := b.q.Stats(ctx)
	if err != nil {
		return err
	}
	workers, err := b.q.Workers(ctx)
	if err != nil {
		return err
	}
	mine, alive, err := b.ourJobs(ctx, cfg)
	if err != nil {
		return err // nothing is submitted without knowing what runs
	}
	b.resumeRequested(ctx, cfg)

	backlog := map[string]uint64{}
	for _, s := range stats {
		backlog[s.Pool] = s.Pending + s.InFlight
	}
	b.unserved(cfg, backlog)
	for _, pool := range cfg.Pools() {
		q := cfg.Queues[pool]
		jobs := mine[pool]
		ours := map[string]bool{}
		pending, running := 0, 0
		for _, j := range jobs {
			ours[j.ID] = true
			if j.Pending() {
				pending++
			} else {
				running++
			}
		}
		live, externalSlots := 0, 0
		for _, w := range workers {
			if w.Lost || w.Draining || !contains(w.Pools, pool) {
				continue
			}
			live++
			if !ours[w.SlurmJobID] {
				externalSlots += w.Slots
			}
		}
		n := backlog[pool]
		want := JobsToSubmit(int(n), externalSlots, q, pending, running)

		b.mu.Lock()
		st := b.status[pool]
		st.Backlog, st.Workers, st.Pending, st.Running, st.Updated = n, live, pending, running, time.Now().UTC()
		paused := st.Paused
		b.mu.Unlock()
		if paused || want <= 0 {
			continue
		}
		b.submit(ctx, cfg, pool, scripts[pool], want, n, alive)
	}
	b.mu.Lock()
	for id := range b.jobs {
		if !alive[id] {
			delete(b.jobs, id) // ended
		}
	}
	b.mu.Unlock()
	b.saveStatus(ctx)
	return nil
}

// ourJobs are the bridge's jobs by pool (one squeue; a job of the same
// name without the bridge's comment is someone else's) and the ids of all
// of them. A failed squeue is every pool's last error until it answers.
func (b *Bridge) ourJobs(ctx context.Context, cfg *Config) (map[string][]Job, map[string]bool, error) {
	names := make([]string, 0, len(cfg.Queues))
	for _, p := range cfg.Pools() {
		names = append(names, cfg.Name+"-"+p)
	}
	all, err := b.slurm.Jobs(ctx, names)
	b.mu.Lock()
	for _, st := range b.status {
		switch {
		case err != nil:
			st.LastError = "squeue: " + err.Error()
		case strings.HasPrefix(st.LastError, "squeue: "):
			st.LastError = "" // squeue answers again
		}
	}
	b.mu.Unlock()
	if err != nil {
		b.saveStatus(ctx)
		return nil, nil, err
	}
	mine := map[string][]Job{}
	alive := map[string]bool{}
	for _, j := range all {
		if j.Comment != comment(cfg.Name) {
			continue // same name, someone else's job
		}
		pool := strings.TrimPrefix(j.Name, cfg.Name+"-")
		mine[pool] = append(mine[pool], j)
		alive[j.ID] = true
	}
	return mine, alive, nil
}

// unserved notes the pools with a backlog that no allocation queue serves:
// nothing is submitted for them, and the status says so.
func (b *Bridge) unserved(cfg *Config, backlog map[string]uint64) {
	for pool, n := range backlog {
		if _, ok := cfg.Queues[pool]; ok || n == 0 {
			continue
		}
		b.mu.Lock()
		st := b.status[pool]
		if st == nil {
			st = &PoolStatus{Pool: pool}
			b.status[pool] = st
			b.log.Warn("tasks wait in a pool no allocation queue serves: nothing is submitted for them", "pool", pool, "backlog", n)
		}
		st.NoQueue, st.Backlog, st.Updated = true, n, time.Now().UTC()
		b.mu.Unlock()
	}
}

// submit submits want worker jobs of pool, stopping at the first failure
// (the pool pauses after PauseAfter in a row); the jobs submitted join
// alive.
func (b *Bridge) submit(ctx context.Context, cfg *Config, pool, script string, want int, backlog uint64, alive map[string]bool) {
	for range want {
		id, err := b.slurm.Submit(ctx, script)
		b.Metrics.Submitted(pool, err == nil)
		b.mu.Lock()
		st := b.status[pool]
		if err != nil {
			st.Failures++
			st.LastError = "sbatch: " + err.Error()
			fails := st.Failures
			b.mu.Unlock()
			b.log.Warn("worker job not submitted", "pool", pool, "failures_in_a_row", fails, "err", err)
			if fails >= cfg.PauseAfter {
				b.pause(pool, fmt.Sprintf("%d submissions failed in a row; last: %v", fails, err))
			}
			return
		}
		st.Failures, st.LastError = 0, ""
		st.Submitted++
		st.Pending++
		b.jobs[id] = pool
		alive[id] = true
		b.mu.Unlock()
		b.log.Info("worker job submitted", "pool", pool, "job_id", id, "backlog", backlog)
	}
}

// resumeRequested unpauses the queues `slurm-bridge resume` asked for.
func (b *Bridge) resumeRequested(ctx context.Context, cfg *Config) {
	for _, p := range cfg.Pools() {
		key := cfg.Name + ".resume." + p
		if _, err := b.kv.Get(ctx, key); err != nil {
			continue
		}
		_ = b.kv.Delete(ctx, key)
		b.mu.Lock()
		st := b.status[p]
		was := st.Paused
		st.Paused, st.PausedReason, st.Failures = false, "", 0
		b.mu.Unlock()
		if was {
			b.log.Info("queue resumed on request", "pool", p)
		}
	}
}

func (b *Bridge) saveStatus(ctx context.Context) {
	b.mu.Lock()
	name := b.cfg.Name
	sts := make([]PoolStatus, 0, len(b.status))
	for _, st := range b.status {
		sts = append(sts, *st)
	}
	jobs, _ := json.Marshal(b.jobs)
	b.mu.Unlock()
	for _, st := range sts {
		b.Metrics.Pool(st.Pool, st.Backlog, st.Workers, st.Pending, st.Running, st.Paused)
	}
	for _, st := range sts {
		data, _ := json.Marshal(st)
		if _, err := b.kv.Put(ctx, name+".status."+st.Pool, data); err != nil {
			b.log.Warn("bridge state not saved", "err", err)
			return
		}
	}
	if _, err := b.kv.Put(ctx, name+".jobs", jobs); err != nil {
		b.log.Warn("bridge state not saved", "err", err)
	}
}

// Shutdown cancels the bridge's pending jobs, and its running ones with
// cancelRunning; never a job that is not its own (its name, its comment).
func (b *Bridge) Shutdown(ctx context.Context, cancelRunning bool) error {
	b.mu.Lock()
	cfg := b.cfg
	b.mu.Unlock()
	names := make([]string, 0, len(cfg.Queues))
	for _, p := range cfg.Pools() {
		names = append(names, cfg.Name+"-"+p)
	}
	jobs, err := b.slurm.Jobs(ctx, names)
	if err != nil {
		return err
	}
	var ids []string
	for _, j := range jobs {
		if j.Comment != comment(cfg.Name) {
			continue
		}
		if j.Pending() || cancelRunning {
			ids = append(ids, j.ID)
		}
	}
	if err := b.slurm.Cancel(ctx, ids); err != nil {
		return err
	}
	if len(ids) > 0 {
		b.log.Info("jobs cancelled at shutdown", "jobs", ids, "running_too", cancelRunning)
	}
	return nil
}

// JobsToSubmit is how many worker jobs a queue needs now: enough for the
// tasks waiting or running (backlog) that workers it did not start
// (externalSlots) do not cover, at q.Slots tasks per job, less the jobs it
// has (pending, running), within q.MaxJobs alive and q.Backlog pending.
func JobsToSubmit(backlog, externalSlots int, q *Queue, pending, running int) int {
	need := 0
	if uncovered := backlog - externalSlots; uncovered > 0 {
		need = (uncovered + q.Slots - 1) / q.Slots
	}
	want := min(need, q.MaxJobs) - (pending + running)
	return max(0, min(want, q.Backlog-pending))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
