package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// Shell modes (HPCQ_TASK_SHELL, and a task's shell).
const (
	// ShellPlain runs every command with bash -c in the login environment
	// the worker captured once at start. The default.
	ShellPlain = "plain"
	// ShellLogin runs every command in a login shell of its own (bash -lc),
	// reading the profile each time.
	ShellLogin = "login"
)

// ErrLoginEnv: the login environment could not be captured.
var ErrLoginEnv = errors.New("cannot capture the login environment")

// envMarker separates whatever a login profile prints from the
// environment that follows it.
const envMarker = "\x00@@hpcq-env@@\x00"

// CaptureLoginEnv runs one login shell (bash -lc) in env and returns the
// environment it ends with: what the profile sets (environment modules,
// conda, spack, pyenv) and the shell functions it exports (Lmod's module,
// as BASH_FUNC_module%%), so that commands run with a plain bash -c in it
// see what they would see in a login shell, without paying for the
// profile each time. Variables of the shell itself (_, SHLVL, PWD, OLDPWD)
// are left out. A profile that does not finish within timeout (default
// 60 s) or fails is an error wrapping ErrLoginEnv that says so.
func CaptureLoginEnv(ctx context.Context, env []string, timeout time.Duration) ([]string, error) {
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	dir, err := os.MkdirTemp("", "hpcq-loginenv-")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrLoginEnv, err)
	}
	defer os.RemoveAll(dir)
	var out bytes.Buffer
	errs := NewCapture(4096)
	o, err := Run(ctx, Command{Line: `printf '` + strings.ReplaceAll(envMarker, "\x00", `\0`) + `'; env -0`, Dir: dir, Env: env,
		Timeout: timeout, KillGrace: time.Second, Stdout: &out, Stderr: errs, Login: true})
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrLoginEnv, err)
	case o.TimedOut:
		return nil, fmt.Errorf("%w: bash -lc did not finish within %v (a login profile that waits for a lock or input?); "+
			"fix the profile or set HPCQ_TASK_SHELL=login to run every command in its own login shell", ErrLoginEnv, timeout)
	case o.Canceled:
		return nil, fmt.Errorf("%w: %w", ErrLoginEnv, ctx.Err())
	case o.ExitCode != 0:
		return nil, fmt.Errorf("%w: bash -lc exited with status %d: %s", ErrLoginEnv, o.ExitCode, strings.TrimSpace(errs.Tail(512)))
	}
	data := out.Bytes()
	i := bytes.LastIndex(data, []byte(envMarker))
	if i < 0 {
		return nil, fmt.Errorf("%w: the login shell printed no environment", ErrLoginEnv)
	}
	var captured []string
	for _, kv := range bytes.Split(data[i+len(envMarker):], []byte{0}) {
		s := string(kv)
		name, _, ok := strings.Cut(s, "=")
		if !ok || name == "" {
			continue
		}
		switch name {
		case "_", "SHLVL", "PWD", "OLDPWD":
			continue
		}
		captured = append(captured, s)
	}
	return captured, nil
}

// WorkerEnv is the environment a worker runs commands in for a shell mode:
// in plain mode the login environment, captured once; in login mode the
// process's own (each command's login shell reads the profile itself).
func WorkerEnv(ctx context.Context, shell string) ([]string, error) {
	switch shell {
	case "", ShellPlain:
		return CaptureLoginEnv(ctx, os.Environ(), 0)
	case ShellLogin:
		return os.Environ(), nil
	}
	return nil, fmt.Errorf("phases: HPCQ_TASK_SHELL=%q: must be plain or login", shell)
}
