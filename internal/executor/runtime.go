package executor

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hpcq/hpcq/internal/image"
	"github.com/hpcq/hpcq/pkg/schema"
)

// siteRuntime is a container runtime of the site's that runs a task's
// commands in its image instead of the worker's own sandbox
// (container.runtime): Apptainer, Singularity, Charliecloud or Podman. Its
// command runs in the task's sandbox on the host (PID namespace, limits,
// user) with the file system left visible, and makes its own container.
type siteRuntime struct {
	name    string // schema.Runtime*
	program string // its path
	version string // its --version's first line
}

// runtimePrograms are the programs of the site runtimes.
var runtimePrograms = map[string]string{schema.RuntimeApptainer: "apptainer", schema.RuntimeSingularity: "singularity",
	schema.RuntimeCharliecloud: "ch-run", schema.RuntimePodman: "podman"}

var runtimeVersions sync.Map // program path -> version

// lookupRuntime finds runtime name on this worker's PATH; an error says
// it is not there.
func lookupRuntime(ctx context.Context, name string) (*siteRuntime, error) {
	prog := runtimePrograms[name]
	path, err := exec.LookPath(prog)
	if err != nil {
		return nil, fmt.Errorf("container.runtime %s: %s is not on this worker's PATH", name, prog)
	}
	r := &siteRuntime{name: name, program: path}
	if v, ok := runtimeVersions.Load(path); ok {
		r.version = v.(string)
		return r, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Env = []string{"USER=hpcq", "PATH=/usr/bin:/bin"} // ch-run wants $USER
	out, _ := cmd.CombinedOutput()
	r.version = strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	runtimeVersions.Store(path, r.version)
	return r, nil
}

// describe is the result's runtime: its name and version.
func (r *siteRuntime) describe() string {
	if r.version == "" || strings.Contains(r.version, r.name) {
		return strings.TrimSpace(r.name + " " + strings.TrimPrefix(r.version, r.name+" version "))
	}
	return r.name + " " + r.version
}

// imageArg is what the runtime is given as the image: Apptainer and
// Singularity take a SIF file as it is, and every runtime an unpacked
// tree (the cache's).
func (r *siteRuntime) imageArg(ref string, im *image.Image) string {
	if (r.name == schema.RuntimeApptainer || r.name == schema.RuntimeSingularity) && im.Kind == image.KindSIF && filepath.IsAbs(ref) {
		return ref
	}
	return im.Root
}

// wrap is the host command line that runs line in image with the runtime:
// the workspace ws bound at its own path and the working directory, the
// task's GPUs' devices (and Apptainer's --nv driver libraries) when it has
// some, the environment passed through.
func (r *siteRuntime) wrap(line, img, ws string, gpus bool) string {
	q := shellQuote
	var argv []string
	switch r.name {
	case schema.RuntimeApptainer, schema.RuntimeSingularity:
		argv = []string{q(r.program), "exec", "--contain", "--no-home", "--writable-tmpfs", "--bind", q(ws + ":" + ws), "--pwd", q(ws)}
		if gpus {
			argv = append(argv, "--nv")
		}
		argv = append(argv, q(img))
	case schema.RuntimeCharliecloud:
		// ch-run binds only onto directories the image has: the
		// workspace is at /mnt, the working directory and HOME.
		argv = []string{"USER=${USER:-hpcq}", q(r.program), "--bind=" + q(ws+":"+charliecloudWS), "--cd=" + charliecloudWS, q(img), "--"}
		line = "HOME=" + charliecloudWS + "; export HOME; " + line
	case schema.RuntimePodman:
		argv = []string{q(r.program), "run", "--rm", "--network=host", "--volume", q(ws + ":" + ws), "--workdir", q(ws)}
		if gpus {
			argv = append(argv, "--device", "nvidia.com/gpu=all")
		}
		argv = append(argv, "--rootfs", q(img+":O"))
	}
	return strings.Join(append(argv, "/bin/sh", "-c", q(line)), " ")
}

// charliecloudWS is where Charliecloud's commands see the workspace.
const charliecloudWS = "/mnt"

// shellQuote is s as one word of a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
