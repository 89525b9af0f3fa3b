package run

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"unicode/utf8"

	"github.com/hpcq/hpcq/pkg/schema"
)

// Harness is the idea's evaluator (run.yaml evaluation.harness;
// docs/evaluation.md): a directory of the idea (a driver, a reference
// implementation, input generators) and the commands that run it on each
// node's built files. With one, a node's metric is the harness's.
type Harness struct {
	// Dir is the harness's directory, resolved against run.yaml's [eval].
	Dir      string   `yaml:"dir"`
	Commands []string `yaml:"commands"`
	// Inputs are what the search ranks nodes by (HPCQ_INPUTS).
	Inputs []string `yaml:"inputs"`
	// Quick are small inputs of a first, correctness-only pass: a node
	// wrong on them is not measured.
	Quick []string `yaml:"quick"`
	// Repeats of each input (HPCQ_REPEATS) besides warm-ups: unset,
	// DefaultRepeats; 0, the harness's choice.
	Repeats  *int `yaml:"repeats"`
	TimeoutS int  `yaml:"timeout_s"`
	// HeldOut are inputs no prompt, memory or node workspace sees: when
	// the search ends, the held-out gate evaluates the best nodes and the
	// baseline on them (internal/gate). None: no gate.
	HeldOut []string `yaml:"held_out"`
	Gate    Gate     `yaml:"gate"`
}

// Gate sets the held-out gate: how many of the search's best nodes it
// evaluates (the baseline besides) and the share by which a node's
// held-out metric may fall below its search metric before it is overfit.
type Gate struct {
	Top          int     `yaml:"top"`
	OverfitShare float64 `yaml:"overfit_share"`
}

// Defaults of the held-out gate.
const (
	DefaultGateTop      = 3
	DefaultOverfitShare = 0.2
)

// Bounds of a harness: its files travel in every node's task.
const (
	MaxHarnessFiles = 64
	MaxHarnessBytes = 1 << 20
)

// resolve makes Dir absolute against dir (run.yaml's directory).
func (h *Harness) resolve(dir string) {
	if h == nil {
		return
	}
	if h.Dir == "" {
		h.Dir = "eval"
	}
	if !filepath.IsAbs(h.Dir) {
		h.Dir = filepath.Join(dir, h.Dir)
	}
}

// validate checks the harness's settings (its files are read by Files).
func (h *Harness) validate() error {
	if h == nil {
		return nil
	}
	ev := h.task(schema.EvalSearch, h.Inputs, nil)
	if err := ev.Validate(); err != nil {
		return fmt.Errorf("run.yaml: evaluation.harness: %w", err)
	}
	if h.Gate.Top == 0 {
		h.Gate.Top = DefaultGateTop
	}
	if h.Gate.OverfitShare == 0 {
		h.Gate.OverfitShare = DefaultOverfitShare
	}
	switch g := h.Gate; {
	case g.Top < 1 || g.Top > 20:
		return fmt.Errorf("run.yaml: evaluation.harness.gate.top: %d, must be 1 to 20", g.Top)
	case !(g.OverfitShare > 0 && g.OverfitShare < 1):
		return fmt.Errorf("run.yaml: evaluation.harness.gate.overfit_share: %g, must be above 0 and below 1", g.OverfitShare)
	}
	if len(h.HeldOut) == 0 {
		return nil
	}
	if err := h.task(schema.EvalHeldOut, h.HeldOut, nil).Validate(); err != nil {
		return fmt.Errorf("run.yaml: evaluation.harness.held_out: %w", err)
	}
	for _, in := range h.HeldOut {
		if slices.Contains(h.Inputs, in) || slices.Contains(h.Quick, in) {
			return fmt.Errorf("run.yaml: evaluation.harness.held_out: %q is also an input of the search: a held-out input is one the search never saw", in)
		}
	}
	return nil
}

// task is the evaluator of a node's task at stage, on inputs.
func (h *Harness) task(stage string, inputs []string, files []schema.File) *schema.Evaluate {
	return &schema.Evaluate{Files: files, Commands: h.Commands, Inputs: inputs, Quick: h.Quick, Stage: stage, Repeats: h.repeats(), TimeoutS: h.TimeoutS}
}

// repeats is what HPCQ_REPEATS says: DefaultRepeats unless run.yaml says.
func (h *Harness) repeats() int {
	if h.Repeats == nil {
		return DefaultRepeats
	}
	return *h.Repeats
}

// HeldOutTask reads the harness's files and is the evaluator of the
// held-out gate's tasks: the held-out inputs, no quick pass (the nodes
// passed it in the search).
func (h *Harness) HeldOutTask() (*schema.Evaluate, error) {
	if len(h.HeldOut) == 0 {
		return nil, errors.New("evaluation.harness.held_out: none")
	}
	files, err := h.Files()
	if err != nil {
		return nil, err
	}
	ev := h.task(schema.EvalHeldOut, h.HeldOut, files)
	ev.Quick = nil
	return ev, nil
}

// SearchTask reads the harness's files and is the evaluator every node of
// the search carries: its inputs, never another stage's.
func (h *Harness) SearchTask() (*schema.Evaluate, error) {
	files, err := h.Files()
	if err != nil {
		return nil, err
	}
	return h.task(schema.EvalSearch, h.Inputs, files), nil
}

// Files are the harness directory's regular files, as a task carries them
// (paths relative to it, executables 0755, binary content base64): a link
// or anything else that is not a regular file is refused, as are more than
// MaxHarnessFiles or MaxHarnessBytes in all.
func (h *Harness) Files() ([]schema.File, error) {
	root, err := os.OpenRoot(h.Dir)
	if err != nil {
		return nil, fmt.Errorf("evaluation.harness.dir: %w", err)
	}
	defer root.Close()
	var files []schema.File
	total := 0
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("%s is not a regular file (a harness is files, not links)", p)
		case len(files) == MaxHarnessFiles:
			return fmt.Errorf("more than %d files", MaxHarnessFiles)
		}
		data, err := root.ReadFile(p)
		if err != nil {
			return err
		}
		if total += len(data); total > MaxHarnessBytes {
			return fmt.Errorf("more than %d bytes in all (the harness travels in every node's task)", MaxHarnessBytes)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		f := schema.File{Path: filepath.ToSlash(p), Content: string(data), Mode: "0644"}
		if fi.Mode()&0o111 != 0 {
			f.Mode = "0755"
		}
		if !utf8.Valid(data) || slices.Contains(data, 0) {
			f.Content, f.Encoding = base64.StdEncoding.EncodeToString(data), schema.EncodingBase64
		}
		files = append(files, f)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("evaluation.harness.dir %s: %w", h.Dir, err)
	}
	if len(files) == 0 {
		return nil, errors.New("evaluation.harness.dir " + h.Dir + ": no file")
	}
	return files, nil
}
