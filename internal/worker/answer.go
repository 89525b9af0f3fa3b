// A task's answer: its result published and acked, or the task handed
// back (to a worker that can run it) or dead-lettered.

package worker

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/hpcq/hpcq/internal/hostbound"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/schema"
)

// answer publishes the result of the delivery's task (and its results rows
// when the worker writes them), then acks the delivery.
func (w *Worker) answer(drain context.Context, d *queue.Delivery, res *schema.NodeResult, log func() *slog.Logger) {
	t := d.Task
	res.V = schema.Version
	res.RunID, res.NodeID, res.Attempt, res.Pool = t.RunID, t.NodeID, t.Attempt, t.Pool
	if w.cfg.Metrics != nil {
		status := "ok"
		switch {
		case res.Error != nil && res.Error.Kind == schema.ErrKindCanceled:
			status = "canceled"
		case res.Error != nil:
			status = "failed"
		}
		phases := make(map[string]time.Duration, len(res.Phases))
		for _, p := range res.Phases {
			phases[p.Name] = time.Duration(p.DurationMS) * time.Millisecond
		}
		w.cfg.Metrics.Task(t.Pool, status, phases)
	}
	res.Worker, res.Host, res.SlurmJobID = w.cfg.ID, w.host, w.cfg.SlurmJobID
	res.HostBound = w.cfg.Bound.Current()
	if res.HostBound != nil && res.Limits != nil && len(res.Limits.GPUs) > 0 {
		res.HostBound.GPUs = hostbound.GPUsOf(res.Limits.GPUs, gpuDevices(w.cfg.GPUDevices))
	}
	// The worker's toolchains are the host's: a task run in a container
	// image had the image's, which the result does not claim.
	if res.Toolchain == nil && len(w.cfg.Toolchains) > 0 && res.Container == nil {
		res.Toolchain = w.cfg.Toolchains
	}
	if w.cfg.Results != nil {
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := w.cfg.Results.Write(rctx, results.AttemptRows(t, res)); err != nil {
			log().Warn("results rows not written", "err", err)
		}
		cancel()
	}
	if err := w.publish(drain, d, res, log); err != nil {
		if nerr := d.Nak(); nerr != nil {
			log().Warn("hand-back failed; the task returns after AckWait", "err", nerr)
		}
		return
	}
	ack := d.Ack
	if time.Since(d.Received) >= confirmAckAfter {
		ack = func() error { return d.AckConfirmed(context.Background()) }
	}
	if err := ack(); err != nil {
		// The result is stored; a redelivery reruns the task and its second
		// result is dropped as a duplicate.
		log().Warn("ack failed after the result was stored", "err", err)
	}
}

// missingToolchains returns the requirements versions does not satisfy;
// "mpi" needs both mpicc and mpirun.
func MissingToolchains(versions map[string]string, requires []string) []string {
	if len(requires) == 0 {
		return nil
	}
	var out []string
	for _, r := range requires {
		_, ok := versions[r]
		if r == "mpi" {
			ok = versions["mpicc"] != "" && versions["mpirun"] != ""
		}
		if !ok {
			out = append(out, r)
		}
	}
	return out
}

// HostRequirement reports whether requirement r is the host's to meet even
// for a task in a container image: its GPUs. Toolchains are the image's.
func HostRequirement(r string) bool { return r == "gpu" }

// hostRequires are the requirements of t the worker's host must meet: all
// of them, or for a task in an image, its GPUs only (the executor checks
// the rest against the image's toolchains).
func hostRequires(t *schema.NodeTask) []string {
	if t.Container == nil {
		return t.Requires
	}
	var out []string
	for _, r := range t.Requires {
		if HostRequirement(r) {
			out = append(out, r)
		}
	}
	return out
}

// handBackUnfit answers a task the worker cannot run (a toolchain it lacks,
// limits beyond its capacity): if another live worker of the pool fits, the
// task goes back with a delay for it; if none does, it is dead-lettered
// with the reason.
func (w *Worker) handBackUnfit(d *queue.Delivery, reason string, fits func(queue.WorkerStatus) bool, log func() *slog.Logger) {
	t := d.Task
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	workers, err := w.q.Workers(ctx)
	if err != nil {
		log().Warn("registry unreadable; task handed back", "err", err)
		_ = d.NakWithDelay(w.cfg.RequeueDelay)
		return
	}
	for _, o := range workers {
		if o.Lost || o.Draining || o.ID == w.cfg.ID || !slices.Contains(o.Pools, t.Pool) {
			continue
		}
		if fits(o) {
			log().Info("task handed back: this worker cannot run it, another can", "reason", reason, "capable_worker", o.ID)
			w.declined(t, reason)
			if err := d.NakWithDelay(w.cfg.RequeueDelay); err != nil {
				log().Warn("hand-back failed; the task returns after AckWait", "err", err)
			}
			return
		}
	}
	w.cfg.Metrics.Task(d.Task.Pool, "dead_lettered", nil)
	if err := d.DeadLetter(ctx, reason); err != nil {
		log().Error("dead letter failed", "err", err)
	}
}

// declined says in the registry that this worker handed t back without
// running it, and why.
func (w *Worker) declined(t *schema.NodeTask, why string) {
	w.reg.Update(func(i *queue.WorkerInfo) {
		i.AddDeclined(queue.DeclinedTask{Run: t.RunID, Node: t.NodeID, Attempt: t.Attempt, Reason: why, At: time.Now().UTC()})
	})
}

// publish stores the result, retrying while the server is unreachable. A
// result the queue rejects as invalid is replaced by an internal-error
// result saying why, so the scheduler still learns the node's fate.
func (w *Worker) publish(drain context.Context, d *queue.Delivery, res *schema.NodeResult, log func() *slog.Logger) error {
	backoff := 200 * time.Millisecond
	for {
		dup, err := d.PublishResult(context.Background(), res)
		if err == nil {
			if dup {
				// The queue kept the first: this task ran again after an
				// ack was lost (or this publish was retried after a lost PubAck).
				log().Info("result already stored for this attempt; this one is dropped")
			}
			return nil
		}
		if errors.Is(err, schema.ErrInvalidMessage) {
			log().Error("result rejected, reporting an internal error instead", "err", err)
			res = &schema.NodeResult{
				V: schema.Version, RunID: res.RunID, NodeID: res.NodeID, Attempt: res.Attempt, Pool: res.Pool,
				Worker: res.Worker, Started: res.Started, DurationMS: res.DurationMS,
				Error: &schema.ResultError{Phase: "report", Kind: schema.ErrKindInfra, Message: "result could not be published: " + err.Error()},
			}
			continue
		}
		log().Warn("publish result failed, retrying", "err", err, "retry_in", backoff)
		select {
		case <-drain.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// gpuDevices are the worker's GPUs as hostbound names them.
func gpuDevices(ds []queue.GPUDevice) []hostbound.Device {
	out := make([]hostbound.Device, 0, len(ds))
	for _, d := range ds {
		dev := hostbound.Device{Index: d.Index, UUID: d.UUID, Name: d.Name}
		for _, m := range d.MIG {
			dev.MIG = append(dev.MIG, m.UUID)
		}
		out = append(out, dev)
	}
	return out
}
