package executor

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hpcq/hpcq/internal/image"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/pkg/schema"
)

// imageToolchains are the toolchains inside image im (what DetectToolchains
// finds on a host, probed in a container of the image with no network),
// once per image: by digest, or by path for a directory.
func (e *Executor) imageToolchains(ctx context.Context, im *image.Image) (map[string]string, error) {
	key := im.Digest
	if key == "" {
		key = "dir:" + im.Root
	}
	e.imagesMu.Lock()
	v, ok := e.imageTools[key]
	e.imagesMu.Unlock()
	if ok {
		return v, nil
	}
	dir, err := os.MkdirTemp(e.cfg.RunsDir, ".probe-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	c := NewCapture(1 << 20)
	o, err := Run(ctx, Command{Line: detectScript, Dir: dir, Env: []string{"LANG=C"}, Stdout: c, Stderr: c, KillGrace: time.Second,
		Sandbox: e.sandbox, Root: im.Root, NoNetwork: true, TmpMB: 256})
	switch {
	case err != nil:
		return nil, fmt.Errorf("probing the toolchains of the image %s: %w", im.Ref, err)
	case o.TimedOut:
		return nil, fmt.Errorf("probing the toolchains of the image %s: timed out", im.Ref)
	}
	tools := parseDetection(c.String()).Versions
	delete(tools, "gpu") // the host's devices, not the image's
	e.imagesMu.Lock()
	if e.imageTools == nil {
		e.imageTools = map[string]map[string]string{}
	}
	e.imageTools[key] = tools
	e.imagesMu.Unlock()
	e.cfg.Images.Log.Info("image toolchains probed", "image", im.Ref, "digest", im.Digest, "toolchains", tools)
	return tools, nil
}

// imageMissing is the task's failure when its image lacks a toolchain it
// requires (nil when it has them all): every worker runs the same image,
// so no other worker would do better.
func imageMissing(t *schema.NodeTask, tools map[string]string) *schema.ResultError {
	var need []string
	for _, r := range t.Requires {
		if !worker.HostRequirement(r) {
			need = append(need, r)
		}
	}
	missing := worker.MissingToolchains(tools, need)
	if len(missing) == 0 {
		return nil
	}
	have := make([]string, 0, len(tools))
	for k, v := range tools {
		have = append(have, strings.TrimSpace(k+" "+v))
	}
	sort.Strings(have)
	if len(have) == 0 {
		have = []string{"none of gcc, clang, gfortran, nvcc, MPI, python3, make, cmake"}
	}
	return &schema.ResultError{Phase: schema.PhaseCoding, Kind: schema.ErrKindImage,
		Message: fmt.Sprintf("the image %s has no %s, which the task requires (it has: %s)", t.Container.Image,
			strings.Join(slices.Compact(missing), ", "), strings.Join(have, "; "))}
}
