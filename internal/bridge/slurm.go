package bridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/hpcq/hpcq/internal/textcut"
)

// Slurm runs the Slurm commands the bridge needs, each bounded by Timeout.
type Slurm struct {
	Timeout time.Duration
	// Env of the commands (JobEnv) [the bridge's own].
	Env []string
}

// Job is one of the bridge's jobs as squeue shows it.
type Job struct {
	ID, State, Name, Comment string
}

// Pending reports whether the job waits for resources.
func (j Job) Pending() bool { return j.State == "PENDING" || j.State == "CONFIGURING" }

// ErrSlurm wraps a Slurm command's failure; the message has its stderr.
var ErrSlurm = errors.New("slurm")

func (s Slurm) run(ctx context.Context, name string, args ...string) (string, error) {
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = time.Second
	cmd.Env = s.Env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		return "", fmt.Errorf("%w: %s timed out after %v", ErrSlurm, name, timeout)
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		msg = textcut.Head(msg, 500)
		return "", fmt.Errorf("%w: %s: %v: %s", ErrSlurm, name, err, msg)
	}
	return stdout.String(), nil
}

// Submit runs sbatch --parsable on script and returns the job id.
func (s Slurm) Submit(ctx context.Context, script string) (string, error) {
	out, err := s.run(ctx, "sbatch", "--parsable", script)
	if err != nil {
		return "", err
	}
	id, _, _ := strings.Cut(strings.TrimSpace(out), ";") // "123" or "123;cluster"
	if id == "" || strings.ContainsAny(id, " \t\n") {
		return "", fmt.Errorf("%w: sbatch --parsable printed %q, not a job id", ErrSlurm, out)
	}
	return id, nil
}

// TestOnly checks a script's request without submitting it (sbatch
// --test-only): a bad partition, account or limit fails here.
func (s Slurm) TestOnly(ctx context.Context, script string) error {
	_, err := s.run(ctx, "sbatch", "--test-only", script)
	return err
}

// Jobs lists the pending and running jobs with these names, in one call.
func (s Slurm) Jobs(ctx context.Context, names []string) ([]Job, error) {
	if len(names) == 0 {
		return nil, nil
	}
	out, err := s.run(ctx, "squeue", "-h", "--name="+strings.Join(names, ","), "-o", "%i|%T|%j|%k")
	if err != nil {
		return nil, err
	}
	return parseJobs(out)
}

// parseJobs reads squeue -o "%i|%T|%j|%k" output.
func parseJobs(out string) ([]Job, error) {
	var jobs []Job
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.SplitN(line, "|", 4)
		if len(f) != 4 || strings.TrimSpace(f[0]) == "" {
			return nil, fmt.Errorf("%w: squeue line %q: want id|state|name|comment", ErrSlurm, line)
		}
		jobs = append(jobs, Job{ID: strings.TrimSpace(f[0]), State: strings.TrimSpace(f[1]), Name: strings.TrimSpace(f[2]), Comment: strings.TrimSpace(f[3])})
	}
	return jobs, nil
}

// Cancel cancels jobs by id.
func (s Slurm) Cancel(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := s.run(ctx, "scancel", ids...)
	return err
}
