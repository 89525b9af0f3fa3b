// Command slurm is the benchmark behind `make bench-slurm`: 1000 tasks of
// `sleep 0.1` on the same local Slurm (scripts/services.sh), first as one
// sbatch job per task, then as hpcq tasks run by workers that slurm-bridge
// starts as Slurm jobs. Each side is timed from the first submission to the
// last task done. It prints:
//
//	bench-slurm tasks=1000 sbatch_per_task_s=<f> hpcq_s=<f> ratio=<f>
//
// where ratio = sbatch_per_task_s / hpcq_s.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/schema"
)

func main() {
	tasks := flag.Int("tasks", 1000, "tasks on each side")
	bin := flag.String("bin", "bin", "directory of the hpcq binaries (make build)")
	services := flag.String("services", "scripts/services.sh", "services.sh")
	flag.Parse()
	if err := run(*tasks, *bin, *services); err != nil {
		fmt.Fprintln(os.Stderr, "bench-slurm:", err)
		os.Exit(1)
	}
}

// run starts the Slurm of the benchmark, submits n worker jobs through the
// bridge and prints the result lines.
//
// Long: the benchmark's scenario step by step, as BENCHMARKS.md describes
// it.
func run(n int, binDir, services string) error {
	binDir, err := filepath.Abs(binDir)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "hpcq-bench-slurm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	env, stop, err := startServices(services, dir)
	defer stop()
	if err != nil {
		return err
	}
	os.Setenv("SLURM_CONF", env["SLURM_CONF"])
	natsURL := env["HPCQ_NATS_URL"]

	// Baseline: one sbatch job per task.
	t0 := time.Now()
	for i := range n {
		out, err := exec.Command("sbatch", "--parsable", "--job-name=bench-sbatch", "--output=/dev/null", "--cpus-per-task=1",
			"--wrap", "sleep 0.1").Output()
		if err != nil {
			return fmt.Errorf("sbatch %d: %w", i, err)
		}
		_ = out
	}
	if err := waitGone("bench-sbatch", 60*time.Minute); err != nil {
		return err
	}
	sbatchS := time.Since(t0).Seconds()

	// hpcq: the bridge starts workers as jobs; tasks go through the queue.
	ctx := context.Background()
	q, err := queue.Dial(ctx, queue.ConnConfig{URL: natsURL, Name: "bench-slurm"}, queue.Options{}, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer q.Close()
	cfg := filepath.Join(dir, "bridge.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`name: bench
interval: 250ms
log_dir: %s
worker_bin: %s
queues:
  cpu: {partition: debug, cpus_per_task: 2, slots: 4, max_jobs: 4, backlog: 4, idle_timeout: 3s, time_limit: "30"}
`, filepath.Join(dir, "logs"), filepath.Join(binDir, "worker"))), 0o644); err != nil {
		return err
	}
	bridge := exec.Command(filepath.Join(binDir, "slurm-bridge"), "--config", cfg)
	bridge.Env = append(os.Environ(), "HPCQ_NATS_URL="+natsURL, "HPCQ_WORK_DIR="+filepath.Join(dir, "work"), "HPCQ_LOG_LEVEL=warn")
	bridge.Stderr = os.Stderr
	run := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	w, err := q.WatchRun(ctx, run, time.Now())
	if err != nil {
		return err
	}
	defer w.Close()
	t1 := time.Now()
	if err := bridge.Start(); err != nil {
		return err
	}
	defer func() {
		_ = bridge.Process.Signal(syscall.SIGTERM)
		_ = bridge.Wait()
		_ = waitGone("bench-cpu", time.Minute)
	}()
	var ts []*schema.NodeTask
	for i := range n {
		ts = append(ts, &schema.NodeTask{V: schema.Version, RunID: run, NodeID: fmt.Sprintf("t%05d", i), Attempt: 1, Pool: "cpu",
			Artifacts: schema.Artifacts{Run: schema.RunPhase{Commands: []string{"sleep 0.1"}}}})
	}
	if _, err := q.PublishTasks(ctx, ts); err != nil {
		return err
	}
	deadline := time.After(30 * time.Minute)
	var first time.Duration
	var durs []float64
	workers := map[string]bool{}
	for done := 0; done < n; {
		select {
		case r := <-w.Results:
			if !r.OK() {
				return fmt.Errorf("task %s failed: %+v", r.NodeID, r.Error)
			}
			if done == 0 {
				first = time.Since(t1)
			}
			durs = append(durs, float64(r.DurationMS))
			workers[r.Worker] = true
			done++
		case d := <-w.DeadLetters:
			return fmt.Errorf("task %s dead-lettered: %s", d.NodeID, d.Reason)
		case <-deadline:
			return fmt.Errorf("hpcq side: %d of %d tasks done after 30 minutes", done, n)
		}
	}
	hpcqS := time.Since(t1).Seconds()
	sort.Float64s(durs)
	sum := 0.0
	for _, d := range durs {
		sum += d
	}
	// Where the hpcq side's time goes: the start (bridge, Slurm, worker
	// start-up) until the first result, and each task's time on its worker
	// (workspace, sandbox, the command, uploads) against the 100 ms sleep.
	fmt.Fprintf(os.Stderr, "  hpcq: first result after %.2f s; %d workers; task duration on the worker p50 %.0f ms, p90 %.0f ms, sum %.1f s\n",
		first.Seconds(), len(workers), durs[len(durs)/2], durs[len(durs)*9/10], sum/1000)
	fmt.Printf("bench-slurm tasks=%d sbatch_per_task_s=%.3f hpcq_s=%.3f ratio=%.2f\n", n, sbatchS, hpcqS, sbatchS/hpcqS)
	return nil
}

// startServices starts a private Slurm and nats-server under dir; stop
// stops them by their pid files.
func startServices(script, dir string) (map[string]string, func(), error) {
	env := map[string]string{}
	var started []string
	stop := func() {
		for i := len(started) - 1; i >= 0; i-- {
			_ = exec.Command(script, "stop", started[i], filepath.Join(dir, started[i])).Run()
		}
	}
	for _, svc := range []string{"nats", "slurm"} {
		cmd := exec.Command(script, "start", svc, filepath.Join(dir, svc))
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		started = append(started, svc)
		if err != nil {
			return env, stop, fmt.Errorf("services.sh start %s: %w", svc, err)
		}
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), "="); ok {
				env[k] = v
			}
		}
	}
	return env, stop, nil
}

// waitGone waits until no job of name is pending or running.
func waitGone(name string, timeout time.Duration) error {
	end := time.Now().Add(timeout)
	for time.Now().Before(end) {
		out, err := exec.Command("squeue", "-h", "--name="+name, "-o", "%i").Output()
		if err == nil && strings.TrimSpace(string(out)) == "" {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("jobs %s still in squeue after %v", name, timeout)
}
