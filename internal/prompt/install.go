package prompt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/schema"
)

// Step is one answer of the iterative installer (phase1_mode iterative): the
// next shell command to run, or done.
type Step struct {
	Command string `json:"command"`
	Done    bool   `json:"done"`
	Reason  string `json:"reason"`
}

// ErrStep: an installer reply that is not a step.
var ErrStep = errors.New("unusable install step")

// MaxCommandBytes bounds one install command.
const MaxCommandBytes = 8 << 10

// ParseStep reads an installer reply: one JSON object {"command": "...",
// "done": false, "reason": "..."} or {"done": true, "reason": "..."}
// (a markdown fence is tolerated).
func ParseStep(reply string) (Step, error) {
	text := strings.TrimSpace(llm.StripFence(reply))
	var s Step
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Step{}, fmt.Errorf("%w: want {\"command\": \"...\", \"done\": false, \"reason\": \"...\"}: %v", ErrStep, err)
	}
	if dec.More() {
		return Step{}, fmt.Errorf("%w: data after the JSON object", ErrStep)
	}
	s.Command = strings.TrimSpace(s.Command)
	switch {
	case s.Done && s.Command != "":
		return Step{}, fmt.Errorf("%w: done with a command: one or the other", ErrStep)
	case !s.Done && s.Command == "":
		return Step{}, fmt.Errorf("%w: no command and not done", ErrStep)
	case len(s.Command) > MaxCommandBytes:
		return Step{}, fmt.Errorf("%w: a command of %d bytes, at most %d", ErrStep, len(s.Command), MaxCommandBytes)
	case strings.ContainsRune(s.Command, 0):
		return Step{}, fmt.Errorf("%w: a NUL byte in the command", ErrStep)
	}
	return s, nil
}

// CommandResult is what running one install command gave.
type CommandResult struct {
	ExitCode int
	Output   string // combined, already bounded by the caller
}

// InstallParams configure Install.
type InstallParams struct {
	Client llm.Client
	// Messages open the conversation (the installer prompt: environment,
	// what the node needs).
	Messages []llm.Message
	// Run runs one command in the node's workspace (executor.Run on a worker).
	Run func(ctx context.Context, command string) (CommandResult, error)
	// MaxSteps bounds the commands [12]; Retries bounds unusable replies in
	// a row [2].
	MaxSteps, Retries int
	Node              string
}

// ErrInstall: the installer ran out of steps or replies.
var ErrInstall = errors.New("install")

// Install runs the iterative installer: ask for the next command, run it,
// feed back exit code and output, until the model says done or MaxSteps
// commands have run. It returns the steps run.
func Install(ctx context.Context, p InstallParams) ([]Step, error) {
	maxSteps, retries := p.MaxSteps, p.Retries
	if maxSteps <= 0 {
		maxSteps = 12
	}
	if retries <= 0 {
		retries = 2
	}
	msgs := append([]llm.Message(nil), p.Messages...)
	var ran []Step
	bad := 0
	for {
		resp, err := p.Client.Chat(ctx, llm.Request{Messages: msgs, JSON: true, Purpose: "install", Node: p.Node})
		if err != nil {
			return ran, fmt.Errorf("%w of %s: %w", ErrInstall, p.Node, err)
		}
		msgs = append(msgs, llm.Message{Role: "assistant", Content: resp.Content})
		step, err := ParseStep(resp.Content)
		if err != nil {
			if bad++; bad > retries {
				return ran, fmt.Errorf("%w of %s: %d unusable replies in a row: %w", ErrInstall, p.Node, bad, err)
			}
			msgs = append(msgs, llm.Message{Role: "user", Content: fmt.Sprintf("Your reply could not be used: %v\nAnswer with one JSON object.", err)})
			continue
		}
		bad = 0
		if step.Done {
			return ran, nil
		}
		if len(ran) == maxSteps {
			return ran, fmt.Errorf("%w of %s: %d commands run and not done (phase1_max_steps)", ErrInstall, p.Node, maxSteps)
		}
		res, err := p.Run(ctx, step.Command)
		if err != nil {
			return ran, fmt.Errorf("%w of %s: running %q: %w", ErrInstall, p.Node, step.Command, err)
		}
		ran = append(ran, step)
		msgs = append(msgs, llm.Message{Role: "user", Content: fmt.Sprintf("Command %d: %s\nExit code: %d\nOutput:\n%s\n\nNext step: the next command, or done.",
			len(ran), step.Command, res.ExitCode, res.Output)})
	}
}

// InstallMessages open the iterative installer's conversation for a task:
// what must be in place and what the workspace holds.
func InstallMessages(t *schema.NodeTask) []llm.Message {
	var files []string
	for _, f := range t.Artifacts.Coding.Workspace.Files {
		files = append(files, f.Path)
	}
	var b strings.Builder
	b.WriteString("You set up the workspace of an HPC experiment node on a Linux compute node, one shell command at a time: " +
		"you give the next command, it runs with bash -lc in the workspace, you see its exit code and output, and you give the next " +
		"command, until what the node needs is in place.\n\n# Goal\n\n")
	b.WriteString(strings.TrimSpace(t.Install.Goal))
	fmt.Fprintf(&b, "\n\n# Workspace\n\nFiles: %s\nThe compile phase will run: %s\nThe run phase will run: %s\n",
		strings.Join(files, ", "), strings.Join(t.Artifacts.Compile.Commands, "; "), strings.Join(t.Artifacts.Run.Commands, "; "))
	if m := strings.TrimSpace(t.Install.Memory); m != "" {
		b.WriteString("\n# Memory\n\nWhat this experiment's earlier nodes learned (read only here):\n\n" + m + "\n")
	}
	fmt.Fprintf(&b, "\n# Rules\n\nAt most %d commands. There may be no root: install in user space (the workspace, pip --user, "+
		"spack, module load) and check before you install. Answer with one JSON object and nothing else: "+
		`{"command": "...", "done": false, "reason": "..."} for the next command, or {"done": true, "reason": "..."} when everything is in place.`,
		t.Install.MaxSteps)
	return []llm.Message{{Role: "system", Content: defaultSystem}, {Role: "user", Content: b.String()}}
}

// NewInstaller is a worker's iterative installer (the executor's Installer)
// on a client, the scheduler's LLM gateway on a cluster.
func NewInstaller(c llm.Client) func(ctx context.Context, t *schema.NodeTask, run func(ctx context.Context, command string) (int, string, error)) error {
	return func(ctx context.Context, t *schema.NodeTask, run func(ctx context.Context, command string) (int, string, error)) error {
		_, err := Install(ctx, InstallParams{Client: c, Messages: InstallMessages(t), MaxSteps: t.Install.MaxSteps, Node: t.NodeID,
			Run: func(ctx context.Context, command string) (CommandResult, error) {
				code, out, err := run(ctx, command)
				return CommandResult{ExitCode: code, Output: out}, err
			}})
		return err
	}
}
