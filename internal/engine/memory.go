// The engine's memory hooks: what a node's branch is told as the node is
// planned, written and ends.

package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hpcq/hpcq/internal/prompt"
	"github.com/hpcq/hpcq/internal/run"
	"github.com/hpcq/hpcq/internal/search"
	"github.com/hpcq/hpcq/internal/textcut"
	"github.com/hpcq/hpcq/internal/tree"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// hasEvent says whether branch wrote an event of kind itself (a node done
// again after a resume keeps the one node_created it had).
func (e *engine) hasEvent(ctx context.Context, branch, kind string) (bool, error) {
	evs, _, err := e.s.Memory.RecallList(ctx, memory.RecallListParams{Branch: branch})
	if err != nil {
		return false, err
	}
	for _, ev := range evs {
		if ev.Branch == branch && ev.Kind == kind {
			return true, nil
		}
	}
	return false, nil
}

// injectMemory renders node's memory for its Phase 0 or code prompt
// (purpose) and records the seed's memory_context_injected event: what
// each section carried of its budget. The evaluation prompts about the
// node render it without the event, which would otherwise crowd the recall
// window the next prompts see.
func (e *engine) injectMemory(ctx context.Context, node, purpose string) (string, error) {
	rd, err := e.s.Memory.RenderForPrompt(ctx, node, purpose, 0)
	if err != nil {
		return "", err
	}
	parts := make([]string, 0, len(rd.Sections))
	for _, s := range rd.Sections {
		p := fmt.Sprintf("%s %d/%d", s.Name, s.Chars, s.Budget)
		if s.Compressed {
			p += " compressed"
		}
		if s.Truncated {
			p += " cut"
		}
		parts = append(parts, p)
	}
	payload := fmt.Sprintf("%s prompt: %d chars of memory (%s)", purpose, len(rd.Text), strings.Join(parts, ", "))
	if _, err := e.s.Memory.RecallAppend(ctx, node, memory.RecallEvent{Kind: memory.EventMemoryContextInjected, NodeID: node, Payload: payload}); err != nil {
		return "", err
	}
	return rd.Text, nil
}

// memoryPhase0 keeps a node's Phase 0 in its branch, per the seed's
// toggles: the whole output in archival memory (PHASE0_INTERNAL), and the
// plan's summary in core (PHASE0_SUMMARY) unless the model wrote one for
// this node itself.
func (e *engine) memoryPhase0(ctx context.Context, node, output string, plan prompt.Plan) error {
	if run.On(e.s.Spec.Memory.PersistPhase0Internal) {
		if _, _, err := e.s.Memory.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: node, Text: output, Tags: []string{"PHASE0_INTERNAL", "node:" + node},
			Context: "phase0"}); err != nil {
			return err
		}
	}
	if !run.On(e.s.Spec.Memory.AlwaysInjectPhase0Summary) {
		return nil
	}
	if cur, ok, err := e.s.Memory.CoreGet(ctx, node, "PHASE0_SUMMARY"); err != nil || (ok && cur.Branch == node) {
		return err
	}
	summary := e.s.Section(ctx, plan.Summary(), "phase0_summary", "the node's Phase 0 plan: approach, toolchain, build, run, metric")
	_, err := e.s.Memory.CoreSet(ctx, memory.CoreSetParams{Branch: node, Key: "PHASE0_SUMMARY", Value: summary, Importance: 5})
	return err
}

// memoryAfter writes the events of seed 003 for a node that ended: one per
// phase, node_result, and the [SUCCESS, stage:X] or [ERROR] archival entry.
func (e *engine) memoryAfter(ctx context.Context, n *tree.Node, task *schema.NodeTask, o rundir.Outcome) {
	stage := search.StageName(max(n.Stage, 1))
	warn := func(err error) {
		if err != nil {
			e.s.Log.Warn("memory write after the node failed", "node_id", n.ID, "err", err)
		}
	}
	e.phaseEvents(ctx, n, task, o, warn)
	warn(e.s.Memory.ArchivalWrites(ctx, n.ID, e.nodeArchival(ctx, n, o, stage, warn)))
	e.sweeps.mu.Lock()
	e.sweeps.pending = append(e.sweeps.pending, n.ID)
	e.sweeps.mu.Unlock()
	e.sweep(ctx, false)
}

// phaseEvents are the recall events of node n's phases, by the engine
// only where the worker did not write them (those it could not store came
// back with the result; a task published without Recall, by a run resumed
// from an earlier version, gets them from the result), and what the
// download phase and the plots changed.
func (e *engine) phaseEvents(ctx context.Context, n *tree.Node, task *schema.NodeTask, o rundir.Outcome, warn func(error)) {
	switch {
	case o.Result == nil || o.Cached:
	case task != nil && task.Recall != nil:
		// The worker stored the phase events as they happened; those it
		// could not store came back with the result.
		for _, ev := range o.Result.RecallPending {
			_, err := e.s.Memory.RecallAppend(ctx, n.ID, memory.RecallEvent{Kind: ev.Kind, NodeID: n.ID, Phase: ev.Phase, Payload: ev.Payload})
			warn(err)
		}
	default:
		// A task published without Recall (a run resumed from an earlier
		// version): the events from the result, after the fact.
		for _, ph := range o.Result.Phases {
			kind, payload := memory.EventPhaseComplete, fmt.Sprintf("exit %d in %d ms", ph.ExitCode, ph.DurationMS)
			switch {
			case !ph.OK:
				kind = memory.EventErrorEncountered
				payload += "\n" + textcut.TailLines(ph.LogTail, 1500)
			case ph.Name == schema.PhaseRun:
				kind = memory.EventExecutionResult
				payload += "\n" + textcut.TailLines(ph.LogTail, 1500)
			}
			_, err := e.s.Memory.RecallAppend(ctx, n.ID, memory.RecallEvent{Kind: kind, NodeID: n.ID, Phase: ph.Name, Payload: payload})
			warn(err)
		}
	}
	if o.Result != nil && !o.Cached && task != nil {
		for _, ph := range o.Result.Phases {
			if ph.Name != schema.PhaseDownload {
				continue
			}
			cmds := task.Artifacts.Download.Commands
			if task.Install != nil {
				cmds = append(slices.Clip(cmds), task.Install.Goal) // the planned commands the installer ran or adapted
			}
			changed, err := e.s.Memory.RefreshResources(ctx, n.ID, cmds, ph.OK)
			warn(err)
			if len(changed) > 0 {
				_, err = e.s.Memory.RecallAppend(ctx, n.ID, memory.RecallEvent{Kind: memory.EventResourcesRefreshed, NodeID: n.ID, Phase: schema.PhaseDownload,
					Payload: strings.Join(changed, "; ")})
				warn(err)
			}
		}
	}
	if o.Result != nil && !o.Cached {
		for _, a := range o.Result.Artifacts {
			if a.Kind == schema.ArtifactPlot {
				_, err := e.s.Memory.RecallAppend(ctx, n.ID, memory.RecallEvent{Kind: memory.EventPlotGenerated, NodeID: n.ID, Phase: schema.PhaseRun,
					Payload: fmt.Sprintf("%s (%d bytes), in %s/", a.Name, a.Bytes, rundir.NodeFile(n.ID, rundir.OutputsDir))})
				warn(err)
			}
		}
	}
}

// nodeArchival are node n's archival entries: the [SUCCESS, stage:X] or
// [ERROR] line (also its node_result event), its summary and plot
// analysis, and the seed's snapshots of its code and results.
func (e *engine) nodeArchival(ctx context.Context, n *tree.Node, o rundir.Outcome, stage string, warn func(error)) []memory.ArchivalWriteParams {
	var text string
	var tags []string
	if o.Buggy {
		text = fmt.Sprintf("[ERROR] %s node %s (stage %s) failed: %s", n.Kind, n.ID, stage, o.Reason)
		tags = []string{"ERROR", "stage:" + stage}
		if o.Result != nil && o.Result.Error != nil {
			tags = append(tags, "phase:"+o.Result.Error.Phase)
		}
	} else {
		text = fmt.Sprintf("[SUCCESS, stage:%s] %s node %s: %s = %s %s", stage, n.Kind, n.ID, e.s.Spec.Metric.Name, metricText(o.Metric), e.s.Spec.Metric.Unit)
		if o.Cached {
			text += " (an identical earlier node's result, not run again)"
		}
		tags = []string{"SUCCESS", "stage:" + stage}
	}
	_, err := e.s.Memory.RecallAppend(ctx, n.ID, memory.RecallEvent{Kind: memory.EventNodeResult, NodeID: n.ID, Payload: text})
	warn(err)
	// The node's texts go to archival memory in one transaction, then the
	// sweep sees them all.
	writes := []memory.ArchivalWriteParams{{Text: text, Tags: tags, Context: "node " + n.ID}}
	if strings.TrimSpace(o.Summary) != "" {
		writes = append(writes, memory.ArchivalWriteParams{Text: o.Summary, Tags: []string{"NODE_SUMMARY", "summary:" + n.ID},
			Context: "summary of node " + n.ID})
	}
	if strings.TrimSpace(o.PlotAnalysis) != "" {
		writes = append(writes, memory.ArchivalWriteParams{Text: o.PlotAnalysis,
			Tags: []string{"VLM_ANALYSIS", "plots:" + n.ID}, Context: "analysis of node " + n.ID + "'s plots"})
	}
	// The seed's snapshots: the node's code and its results, searchable
	// later by tag (code:<id>, results:<id>).
	if o.Result != nil && !o.Cached {
		if code := e.nodeCode(n.ID); strings.TrimSpace(code) != "" {
			writes = append(writes, memory.ArchivalWriteParams{Text: textcut.Marked(code, maxSnapshotChars),
				Tags: []string{"code:" + n.ID, "stage:" + stage}, Context: "code of node " + n.ID})
		}
		res := e.s.Section(ctx, e.outputText(o), "results", "the execution result of a node: keep its errors, diagnostics and metrics")
		if strings.TrimSpace(res) != "" {
			writes = append(writes, memory.ArchivalWriteParams{Text: res, Tags: []string{"results:" + n.ID, "stage:" + stage},
				Context: "results of node " + n.ID})
		}
	}
	return writes
}

// forkBranch gives node n its memory branch, forked from parent's, and
// records its creation there once (a resumed run doing the node again
// finds both).
func (e *engine) forkBranch(ctx context.Context, n *tree.Node, parent string) error {
	if e.s.Memory == nil {
		return nil
	}
	_, err := e.s.Memory.Fork(ctx, n.ID, parent)
	redo := errors.Is(err, memory.ErrBranchExists) // a resumed run doing the node again
	if err != nil && !redo {
		return err
	}
	if redo {
		created, err := e.hasEvent(ctx, n.ID, memory.EventNodeCreated)
		if err != nil || created {
			return err
		}
	}
	payload := fmt.Sprintf("%s node %s created in stage %s", n.Kind, n.ID, search.StageName(max(n.Stage, 1)))
	if n.Parent != "" {
		payload += " from " + n.Parent
	}
	_, err = e.s.Memory.RecallAppend(ctx, n.ID, memory.RecallEvent{Kind: memory.EventNodeCreated, NodeID: n.ID, Payload: payload})
	return err
}

// codeGenerated records in node n's branch the files and commands the
// model wrote.
func (e *engine) codeGenerated(ctx context.Context, n *tree.Node, a schema.Artifacts) error {
	if e.s.Memory == nil {
		return nil
	}
	files := make([]string, 0, len(a.Coding.Workspace.Files))
	for _, f := range a.Coding.Workspace.Files {
		files = append(files, fmt.Sprintf("%s (%d bytes)", f.Path, len(f.Content)))
	}
	payload := fmt.Sprintf("%s code: %s; commands: download %d, compile %d, run %d", n.Kind, strings.Join(files, ", "),
		len(a.Download.Commands), len(a.Compile.Commands), len(a.Run.Commands))
	_, err := e.s.Memory.RecallAppend(ctx, n.ID, memory.RecallEvent{Kind: memory.EventCodeGenerated, NodeID: n.ID, Phase: schema.PhaseCoding,
		Payload: payload})
	return err
}

// iterativeInstall makes the planned download commands of task t the goal
// of the worker's iterative installer (phase1.mode: iterative), which runs
// them one at a time under the model's eye and adapts when one fails; the
// installer sees the node's memory (what earlier nodes found installed,
// missing or broken).
func (e *engine) iterativeInstall(ctx context.Context, n *tree.Node, t *schema.NodeTask, notes []string) {
	dl := t.Artifacts.Download.Commands
	if e.s.Spec.Phase1.Mode != "iterative" || len(dl) == 0 {
		return
	}
	goal := "Run or adapt these planned commands:\n" + strings.Join(dl, "\n")
	for _, note := range notes {
		if strings.HasPrefix(note, "download: ") {
			goal = strings.TrimPrefix(note, "download: ") + "\n\n" + goal
		}
	}
	t.Install = &schema.Install{Goal: goal, MaxSteps: e.s.Spec.Phase1.MaxSteps}
	if e.s.Memory != nil {
		if rd, err := e.s.Memory.RenderForPrompt(ctx, n.ID, "install download setup "+goal, installMemoryChars); err == nil {
			t.Install.Memory = rd.Text
		} else {
			e.s.Log.Warn("memory not rendered for the installer", "node_id", n.ID, "err", err)
		}
	}
	t.Artifacts.Download.Commands = nil
}
