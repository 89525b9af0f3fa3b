package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hpcq/hpcq/pkg/schema"
	"github.com/nats-io/nats.go/jetstream"
)

// WorkerInfo is what a worker advertises in the registry.
type WorkerInfo struct {
	ID         string            `json:"id"`
	Host       string            `json:"host"`
	PID        int               `json:"pid"`
	Pools      []string          `json:"pools"`
	Slots      int               `json:"slots"`
	Cores      int               `json:"cores"`
	GPUs       int               `json:"gpus"`
	MemoryMB   int               `json:"memory_mb,omitempty"`
	Toolchains map[string]string `json:"toolchains,omitempty"`
	// Bound is what its host can do at most (peak FLOP/s, memory
	// bandwidth once measured).
	Bound *schema.HostBound `json:"bound,omitempty"`
	// GPUDevices are the GPUs found (nvidia-smi).
	GPUDevices []GPUDevice `json:"gpu_devices,omitempty"`
	// GPUsInUse is how many of its GPUs its running tasks hold (shares add
	// up), as of the last heartbeat.
	GPUsInUse float64   `json:"gpus_in_use,omitempty"`
	Version   string    `json:"version"`
	Started   time.Time `json:"started"`
	LastSeen  time.Time `json:"last_seen"`
	// HeartbeatMS is the worker's heartbeat period, so that readers know
	// when to call it lost.
	HeartbeatMS int64 `json:"heartbeat_ms"`
	// Running is the number of tasks it runs now; Tasks are they (as of
	// the last heartbeat).
	Running int           `json:"running"`
	Tasks   []RunningTask `json:"tasks,omitempty"`
	// Declined are the tasks it handed back recently without running them
	// and why (their limits do not fit its walltime left, or its
	// resources), so that a task waiting for another worker is not shown as
	// merely queued; the newest last, at most MaxDeclined within
	// DeclinedFor.
	Declined []DeclinedTask `json:"declined,omitempty"`
	// Draining is set once the worker stopped pulling.
	Draining bool `json:"draining,omitempty"`
	// SlurmJobID is the Slurm job the worker runs in; Deadline the end of
	// its allocation.
	SlurmJobID string `json:"slurm_job_id,omitempty"`
	// Nodes of its allocation (1 unless a multi-node Slurm job), Hosts
	// their names: it takes tasks of up to Nodes nodes (limits.nodes).
	Nodes    int       `json:"nodes,omitempty"`
	Hosts    []string  `json:"hosts,omitempty"`
	Deadline time.Time `json:"deadline,omitzero"`
}

// RunningTask is a task a worker runs.
type RunningTask struct {
	Run     string    `json:"run"`
	Node    string    `json:"node"`
	Attempt int       `json:"attempt"`
	Started time.Time `json:"started"`
}

// DeclinedTask is a task a worker handed back without running it.
type DeclinedTask struct {
	Run     string    `json:"run"`
	Node    string    `json:"node"`
	Attempt int       `json:"attempt"`
	Reason  string    `json:"reason"`
	At      time.Time `json:"at"`
}

// How many declines a worker advertises, and for how long.
const (
	MaxDeclined = 16
	DeclinedFor = 10 * time.Minute
)

// AddDeclined records d in i.Declined (replacing an earlier decline of
// the same task), dropping those past DeclinedFor or MaxDeclined.
func (i *WorkerInfo) AddDeclined(d DeclinedTask) {
	keep := i.Declined[:0]
	for _, o := range i.Declined {
		if d.At.Sub(o.At) < DeclinedFor && (o.Run != d.Run || o.Node != d.Node) {
			keep = append(keep, o)
		}
	}
	i.Declined = append(keep, d)
	if n := len(i.Declined); n > MaxDeclined {
		i.Declined = append(i.Declined[:0], i.Declined[n-MaxDeclined:]...)
	}
}

// GPUDevice is one GPU of a worker.
type GPUDevice struct {
	Index             string `json:"index"`
	Name              string `json:"name"`
	MemoryMB          int    `json:"memory_mb"`
	ComputeCapability string `json:"compute_capability"`
	UUID              string `json:"uuid,omitempty"`
	// Architecture ("Hopper"), the driver's version, the highest CUDA
	// version it supports and the compute mode ("Default",
	// "Exclusive_Process"), from nvidia-smi -q -x.
	Architecture string `json:"architecture,omitempty"`
	Driver       string `json:"driver,omitempty"`
	CUDA         string `json:"cuda,omitempty"`
	ComputeMode  string `json:"compute_mode,omitempty"`
	// MIGEnabled: the card is in MIG mode (its instances, when any, in MIG).
	MIGEnabled bool `json:"mig_enabled,omitempty"`
	// MIG are its MIG instances when it is split (each a GPU of its own to
	// the worker's slots, by UUID; the whole card is then none).
	MIG []MIGDevice `json:"mig,omitempty"`
}

// MIGDevice is one MIG instance of a GPU: its profile ("1g.5gb"), its
// device number on the card and its UUID (what CUDA_VISIBLE_DEVICES names).
type MIGDevice struct {
	Profile string `json:"profile"`
	Device  int    `json:"device"`
	UUID    string `json:"uuid"`
	// Its memory, multiprocessors and GPU and compute instance ids, from
	// nvidia-smi -q -x (0 when it did not say).
	MemoryMB        int `json:"memory_mb,omitempty"`
	SMs             int `json:"sms,omitempty"`
	GPUInstance     int `json:"gpu_instance,omitempty"`
	ComputeInstance int `json:"compute_instance,omitempty"`
}

// WorkerStatus is a registry entry as a reader sees it.
type WorkerStatus struct {
	WorkerInfo
	// Lost is true when the worker missed 3 heartbeats in a row.
	Lost bool `json:"lost"`
	// SilentFor is how long ago the worker last wrote its entry.
	SilentFor time.Duration `json:"silent_for_ns"`
}

// ErrInvalidWorker is returned for a registration without an id or pools.
var ErrInvalidWorker = errors.New("invalid worker registration")

// Registration keeps a worker's registry entry fresh until Close.
type Registration struct {
	q      *Queue
	mu     sync.Mutex
	info   WorkerInfo
	stop   chan struct{}
	done   chan struct{}
	closed bool
}

// RegisterWorker writes info to the registry and refreshes it every
// Options.HeartbeatPeriod until Close. The id must be a valid KV key
// (letters, digits, '-', '_', '.').
func (q *Queue) RegisterWorker(ctx context.Context, info WorkerInfo) (*Registration, error) {
	if err := schema.CheckID("worker id", info.ID, true); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidWorker, err)
	}
	if len(info.Pools) == 0 {
		return nil, fmt.Errorf("%w: worker %s has no pools", ErrInvalidWorker, info.ID)
	}
	if info.Started.IsZero() {
		info.Started = time.Now().UTC()
	}
	info.HeartbeatMS = q.opts.HeartbeatPeriod.Milliseconds()
	r := &Registration{q: q, info: info, stop: make(chan struct{}), done: make(chan struct{})}
	if err := r.put(ctx); err != nil {
		return nil, err
	}
	go r.loop()
	return r, nil
}

func (r *Registration) put(ctx context.Context) error {
	r.mu.Lock()
	r.info.LastSeen = time.Now().UTC()
	data, err := json.Marshal(r.info)
	id := r.info.ID
	r.mu.Unlock()
	if err != nil {
		return fmt.Errorf("queue: encode worker info: %w", err)
	}
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	if _, err := r.q.kv.Put(ctx, id, data); err != nil {
		return fmt.Errorf("queue: register worker %s: %w", id, err)
	}
	return nil
}

func (r *Registration) loop() {
	defer close(r.done)
	t := time.NewTicker(r.q.opts.HeartbeatPeriod)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), r.q.opts.HeartbeatPeriod)
			if err := r.put(ctx); err != nil {
				r.q.log.Warn("worker heartbeat failed", "worker", r.info.ID, "err", err)
			}
			cancel()
		}
	}
}

// Update changes the advertised state; it is written at the next heartbeat.
func (r *Registration) Update(fn func(*WorkerInfo)) {
	r.mu.Lock()
	fn(&r.info)
	r.mu.Unlock()
}

// Close stops the heartbeats and removes the entry.
func (r *Registration) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	close(r.stop)
	<-r.done
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	if err := r.q.kv.Delete(ctx, r.info.ID); err != nil {
		return fmt.Errorf("queue: unregister worker %s: %w", r.info.ID, err)
	}
	return nil
}

// Workers lists the registry, live workers first, then by id. A worker whose
// entry is older than 3 of its heartbeat periods is reported Lost.
func (q *Queue) Workers(ctx context.Context) ([]WorkerStatus, error) {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	lister, err := q.kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("queue: list workers: %w", err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	now := time.Now()
	out := make([]WorkerStatus, 0, len(keys))
	for _, k := range keys {
		e, err := q.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // unregistered since the listing
		}
		if err != nil {
			return nil, fmt.Errorf("queue: read worker %s: %w", k, err)
		}
		var ws WorkerStatus
		if err := json.Unmarshal(e.Value(), &ws.WorkerInfo); err != nil {
			q.log.Warn("unreadable registry entry skipped", "key", k, "err", err)
			continue
		}
		// The server's timestamp of the entry, not the worker's clock.
		ws.SilentFor = now.Sub(e.Created())
		period := time.Duration(ws.HeartbeatMS) * time.Millisecond
		if period <= 0 {
			period = q.opts.HeartbeatPeriod
		}
		ws.Lost = ws.SilentFor > 3*period
		out = append(out, ws)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Lost != out[j].Lost {
			return !out[i].Lost
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// PoolStats is the state of one pool.
type PoolStats struct {
	Pool string `json:"pool"`
	// Pending tasks wait for a worker.
	Pending uint64 `json:"pending"`
	// InFlight tasks are delivered and not yet acknowledged.
	InFlight uint64 `json:"in_flight"`
	// DeadLettered counts the pool's dead letters kept.
	DeadLettered uint64 `json:"dead_lettered"`
	// Workers and LostWorkers count registry entries serving the pool.
	Workers     int `json:"workers"`
	LostWorkers int `json:"lost_workers"`
}

// Stats returns every pool that has tasks, a consumer, dead letters or
// workers, sorted by name.
func (q *Queue) Stats(ctx context.Context) (stats []PoolStats, err error) {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	defer func(start time.Time) { err = explain(q.nc, err, start) }(time.Now())
	pools := map[string]*PoolStats{}
	get := func(p string) *PoolStats {
		if s, ok := pools[p]; ok {
			return s
		}
		s := &PoolStats{Pool: p}
		pools[p] = s
		return s
	}
	tasks, err := q.js.Stream(ctx, TasksStream)
	if err != nil {
		return nil, fmt.Errorf("queue: stats: %w", err)
	}
	ti, err := tasks.Info(ctx, jetstream.WithSubjectFilter(taskPrefix+"*.*"))
	if err != nil {
		return nil, fmt.Errorf("queue: stats: %w", err)
	}
	queued := map[string]uint64{}
	for subj, n := range ti.State.Subjects {
		p, _, _ := strings.Cut(strings.TrimPrefix(subj, taskPrefix), ".")
		queued[p] += n
		get(p)
	}
	cl := tasks.ListConsumers(ctx)
	for ci := range cl.Info() {
		p, ok := strings.CutSuffix(strings.TrimPrefix(ci.Config.FilterSubject, taskPrefix), ".*")
		if !ok || p == "" || ci.Name != ConsumerName(p) {
			continue
		}
		s := get(p)
		s.InFlight = uint64(ci.NumAckPending)
	}
	if err := cl.Err(); err != nil {
		return nil, fmt.Errorf("queue: stats: list consumers: %w", err)
	}
	for p, n := range queued {
		s := get(p)
		if n > s.InFlight {
			s.Pending = n - s.InFlight
		}
	}
	dlq, err := q.js.Stream(ctx, DLQStream)
	if err != nil {
		return nil, fmt.Errorf("queue: stats: %w", err)
	}
	di, err := dlq.Info(ctx, jetstream.WithSubjectFilter(dlqPrefix+"*"))
	if err != nil {
		return nil, fmt.Errorf("queue: stats: %w", err)
	}
	for subj, n := range di.State.Subjects {
		get(subj[len(dlqPrefix):]).DeadLettered = n
	}
	workers, err := q.Workers(ctx)
	if err != nil {
		return nil, err
	}
	for _, w := range workers {
		for _, p := range w.Pools {
			s := get(p)
			if w.Lost {
				s.LostWorkers++
			} else {
				s.Workers++
			}
		}
	}
	out := make([]PoolStats, 0, len(pools))
	for _, s := range pools {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pool < out[j].Pool })
	return out, nil
}
