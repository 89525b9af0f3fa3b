package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hpcq/hpcq/pkg/queue"
)

// A delivery's way from a slot to its answer, around the executor's run:
// held in the registry, admitted (or answered without running), and
// answered when the executor could not run it.

// hold shows the task running in the registry and keeps its delivery alive
// until it is answered (an InProgress every third of AckWait). The
// function returned ends both.
func (w *Worker) hold(d *queue.Delivery, log func() *slog.Logger) func() {
	t := d.Task
	rt := queue.RunningTask{Run: t.RunID, Node: t.NodeID, Attempt: t.Attempt, Started: time.Now().UTC()}
	w.reg.Update(func(i *queue.WorkerInfo) {
		i.Running = int(w.running.Load())
		i.Tasks = append(i.Tasks, rt)
	})
	w.cfg.Metrics.SetSlots(w.cfg.Slots, int(w.running.Load()))
	w.lastActive.Store(time.Now().UnixNano())

	period := w.q.Options().AckWait / 3
	var hbMu sync.Mutex
	hbStopped := false
	var hb *time.Timer
	hbMu.Lock() // the first beat may fire before hb is assigned
	hb = time.AfterFunc(period, func() {
		if err := d.InProgress(); err != nil {
			log().Warn("in-progress heartbeat failed", "err", err)
		}
		hbMu.Lock()
		if !hbStopped {
			hb.Reset(period)
		}
		hbMu.Unlock()
	})
	hbMu.Unlock()
	return func() {
		hbMu.Lock()
		hbStopped = true
		hb.Stop()
		hbMu.Unlock()
		w.lastActive.Store(time.Now().UnixNano())
		w.running.Add(-1)
		w.reg.Update(func(i *queue.WorkerInfo) {
			i.Running = int(w.running.Load())
			i.Tasks = slices.DeleteFunc(i.Tasks, func(x queue.RunningTask) bool { return x == rt })
		})
		w.cfg.Metrics.SetSlots(w.cfg.Slots, int(w.running.Load()))
	}
}

// admit takes the CPUs and GPUs the task needs, or answers it without
// running it: canceled before it ran, or handed back (a toolchain or a
// size this worker lacks, resources busy, a walltime too short). When it
// does not admit the task, the slot is given back.
func (w *Worker) admit(drain context.Context, d *queue.Delivery, slot int, started time.Time, log func() *slog.Logger) (g grant, ok bool) {
	t := d.Task
	if c, ok := w.cancelOf(t); ok {
		// Answered without running: the scheduler learns the node's fate.
		w.slots <- slot
		w.answer(drain, d, canceledResult(c, started, false), log)
		return grant{}, false
	}
	if missing := MissingToolchains(w.cfg.Toolchains, hostRequires(t)); len(missing) > 0 {
		w.slots <- slot
		w.handBackUnfit(d, fmt.Sprintf("no worker in pool %s has %s", t.Pool, strings.Join(missing, ", ")),
			func(o queue.WorkerStatus) bool { return len(MissingToolchains(o.Toolchains, hostRequires(t))) == 0 }, log)
		return grant{}, false
	}
	if why := w.multiNodeUnfit(t); why != "" {
		w.slots <- slot
		w.handBackUnfit(d, fmt.Sprintf("declined: %s; no live worker of pool %s can run it", why, t.Pool),
			func(o queue.WorkerStatus) bool { return o.Nodes >= t.Limits.Nodes }, log)
		return grant{}, false
	}
	if why := w.res.exceeds(t, w.cfg.Slots); why != "" {
		w.slots <- slot
		cpus, gpus := w.res.need(t, w.cfg.Slots)
		w.handBackUnfit(d, fmt.Sprintf("declined: %s; no live worker of pool %s has that much", why, t.Pool),
			func(o queue.WorkerStatus) bool {
				return o.Cores >= cpus && o.GPUs*wholeGPU >= gpus && (o.MemoryMB == 0 || o.MemoryMB >= t.Limits.MemoryMB)
			}, log)
		return grant{}, false
	}
	g, ok = w.res.take(t, w.cfg.Slots)
	if !ok {
		// Other tasks hold the CPUs or GPUs it needs: later, or another worker.
		w.slots <- slot
		w.handBack(d, w.cfg.RequeueDelay, log, "task handed back: the CPUs or GPUs it needs are busy",
			"limits_cpus", t.Limits.CPUs, "limits_gpus", t.Limits.GPUs)
		return grant{}, false
	}
	if need := DeclaredLimit(t); need > 0 && !w.cfg.Deadline.IsZero() && time.Until(w.cfg.Deadline) < need+walltimeMargin {
		w.res.give(g)
		w.slots <- slot
		left := time.Until(w.cfg.Deadline).Round(time.Second)
		w.handBack(d, w.cfg.RequeueDelay, log, "task declined: its time limits do not fit in the walltime left", "needs", need, "left", left)
		of := "the worker's walltime"
		if w.cfg.SlurmJobID != "" {
			of = "Slurm job " + w.cfg.SlurmJobID + "'s walltime"
		}
		w.declined(t, fmt.Sprintf("its time limits (%v) do not fit in the %v left of %s; %s", need, left, of, walltimeAdvice(need)))
		return grant{}, false
	}
	return g, true
}

// setGPUMetrics records the worker's GPUs and what the tasks of each pool
// hold of them.
func (w *Worker) setGPUMetrics() {
	if len(w.res.gpus) == 0 {
		return
	}
	inUse := w.res.gpusInUse()
	total := 0.0
	for _, v := range inUse {
		total += v
	}
	w.cfg.Metrics.SetGPUs(len(w.res.gpus), inUse, w.cfg.Pools)
	w.reg.Update(func(i *queue.WorkerInfo) { i.GPUsInUse = total })
}

// handBack returns the delivery to the queue after delay without using up
// one of its deliveries, logging why.
func (w *Worker) handBack(d *queue.Delivery, delay time.Duration, log func() *slog.Logger, why string, attrs ...any) {
	w.cfg.Metrics.Task(d.Task.Pool, "handed_back", nil)
	if err := d.HandBack(context.Background(), delay); err != nil {
		log().Warn("hand-back failed; the task returns after AckWait", "err", err)
		return
	}
	log().Info(why, attrs...)
}

// notRun answers a task the executor could not run: canceled (the node's
// fate goes to the scheduler), handed back at once when the worker drains
// (a walltime signal is not the task's fault), else handed back after
// RetryDelay, or dead-lettered on its last delivery.
func (w *Worker) notRun(drain, tctx context.Context, d *queue.Delivery, started time.Time, err error, log func() *slog.Logger) {
	switch {
	case drain.Err() == nil && errors.Is(context.Cause(tctx), ErrCanceled):
		c, _ := w.cancelOf(d.Task)
		log().Info("task canceled", "reason", c.Reason)
		w.answer(drain, d, canceledResult(c, started, true), log)
	case drain.Err() != nil:
		w.handBack(d, 0, log, "task handed back (drain)")
	case errors.Is(err, ErrNodeLost):
		w.handBack(d, 0, log, "task handed back: its allocation lost a node", "err", err)
		w.log.Warn("draining: the Slurm allocation lost a node; its tasks go to another worker", "err", err)
		w.drainSelf()
	case d.LastDelivery():
		reason := fmt.Sprintf("worker %s could not run it on delivery %d of %d: %v", w.cfg.ID, d.NumDelivered, w.q.Options().MaxDeliver, err)
		w.cfg.Metrics.Task(d.Task.Pool, "dead_lettered", nil)
		if derr := d.DeadLetter(context.Background(), reason); derr != nil {
			log().Error("dead letter failed", "err", derr)
		}
	default:
		log().Warn("task could not run, handed back", "err", err, "retry_in", w.cfg.RetryDelay)
		if nerr := d.NakWithDelay(w.cfg.RetryDelay); nerr != nil {
			log().Warn("hand-back failed; the task returns after AckWait", "err", nerr)
		}
	}
}

// walltimeAdvice says how much walltime a task of time limits need asks
// of a job: need and the margin, and a few minutes for what comes before
// the task (the worker's start, the model's replies).
func walltimeAdvice(need time.Duration) string {
	minutes := int(math.Ceil((need + walltimeMargin).Minutes())) + 3
	return fmt.Sprintf("a worker takes it with at least %v left: ask for at least %d minutes (sbatch --time=%d)", need+walltimeMargin, minutes, minutes)
}
