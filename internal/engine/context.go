// What the prompts are told of the run: the history so far, a node's code,
// output, outcome and summary, the idea.

package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/hpcq/hpcq/internal/fileio"
	"github.com/hpcq/hpcq/internal/prompt"
	"github.com/hpcq/hpcq/internal/search"
	"github.com/hpcq/hpcq/internal/textcut"
	"github.com/hpcq/hpcq/internal/tree"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// promptContext is what every prompt of the run has: the research idea
// within its limit, run.yaml's system message and domain section, and
// whether the memory is on.
func (e *engine) promptContext(ctx context.Context) prompt.Context {
	return prompt.Context{Idea: e.s.IdeaSection(ctx), System: e.s.Spec.Prompt.System, Domain: e.s.Spec.Prompt.Domain, WithMemory: e.s.Memory != nil}
}

// feedback are the Time feedback and Plot feedback sections (seed 003) of
// a prompt about node id's code: how long its phases took against their
// limits, and the plots it wrote.
func (e *engine) feedback(id string) (timing, plots string) {
	o, ok, err := e.files.outcome(id)
	if err != nil || !ok || o.Result == nil {
		return "", ""
	}
	limits := map[string]int{schema.PhaseDownload: e.s.Spec.Limits.DownloadTimeoutS, schema.PhaseCompile: e.s.Spec.Limits.CompileTimeoutS,
		schema.PhaseRun: e.s.Spec.Limits.RunTimeoutS}
	var t strings.Builder
	for _, ph := range o.Result.Phases {
		if ph.Name == schema.PhaseCoding {
			continue
		}
		fmt.Fprintf(&t, "- %s: %.1f s", ph.Name, float64(ph.DurationMS)/1000)
		if l := limits[ph.Name]; l > 0 {
			fmt.Fprintf(&t, " of its %d s limit (%.0f%%)", l, 100*float64(ph.DurationMS)/1000/float64(l))
		}
		t.WriteString("\n")
	}
	var names []string
	for _, a := range o.Result.Artifacts {
		if a.Kind == schema.ArtifactPlot {
			names = append(names, a.Name)
		}
	}
	if len(names) > 0 {
		plots = "The node wrote these plots (brought home to the run directory): " + strings.Join(names, ", ") + "."
	}
	if o.PlotAnalysis != "" {
		plots += "\n\nWhat the vision model saw in them:\n" + o.PlotAnalysis
	}
	return strings.TrimSpace(t.String()), plots
}

// nodeCode is a node's files as a prompt shows them.
func (e *engine) nodeCode(id string) string {
	t, ok, err := e.files.task(id)
	if err != nil || !ok {
		return ""
	}
	return codeText(t, false)
}

// codeText is a node's files and commands in markdown: for a prompt, each
// file under a "###" heading of its path as it is; for the report (under
// its "### Its code"), under "####" with the path escaped.
func codeText(t *schema.NodeTask, report bool) string {
	var b strings.Builder
	size := 256
	for _, f := range t.Artifacts.Coding.Workspace.Files {
		size += 2*len(f.Path) + len(f.Content) + 32
	}
	b.Grow(size) // the code is most of it: one allocation, not one per doubling
	for _, f := range t.Artifacts.Coding.Workspace.Files {
		if report {
			b.WriteString("#### " + mdText(f.Path) + "\n\n")
		} else {
			b.WriteString("### " + f.Path + "\n\n")
		}
		writeCodeBlock(&b, "", strings.TrimRight(f.Content, "\n"))
	}
	for _, ph := range []struct {
		name string
		cmds []string
	}{{"download", t.Artifacts.Download.Commands}, {"compile", t.Artifacts.Compile.Commands}, {"run", t.Artifacts.Run.Commands}} {
		if len(ph.cmds) > 0 {
			b.WriteString(ph.name + " commands:\n" + codeBlock("sh", strings.Join(ph.cmds, "\n")))
		}
	}
	return strings.TrimSpace(b.String())
}

// nodeOutput is what a node's run showed: the error, the diagnostics and
// the log tails of its phases.
func (e *engine) nodeOutput(id string) string {
	o, ok, err := e.files.outcome(id)
	if err != nil || !ok {
		return ""
	}
	return e.outputText(*o)
}

// outputText is how a node ended, as a prompt shows it.
func (e *engine) outputText(o rundir.Outcome) string {
	var b strings.Builder
	if o.Buggy {
		fmt.Fprintf(&b, "The node failed: %s\n\n", o.Reason)
	} else if o.Metric != nil {
		fmt.Fprintf(&b, "The node ran: %s = %s %s\n\n", e.s.Spec.Metric.Name, metricText(o.Metric), e.s.Spec.Metric.Unit)
	}
	if res := o.Result; res != nil {
		for _, d := range res.Diagnostics {
			fmt.Fprintf(&b, "%s:%d:%d: %s: %s\n", d.File, d.Line, d.Column, d.Severity, d.Message)
		}
		for _, ph := range res.Phases {
			fmt.Fprintf(&b, "\n## %s (exit %d, %d ms)\n%s\n", ph.Name, ph.ExitCode, ph.DurationMS, textcut.TailLines(ph.LogTail, 3000))
		}
		if len(res.Metrics) > 0 {
			names := make([]string, 0, len(res.Metrics))
			for k := range res.Metrics {
				names = append(names, k)
			}
			sort.Strings(names)
			b.WriteString("\nMetrics:")
			for _, k := range names {
				fmt.Fprintf(&b, " %s=%g", k, res.Metrics[k])
			}
			b.WriteString("\n")
		}
	}
	return strings.TrimSpace(b.String())
}

// history is what Phase 0 is told of the past: the earlier runs of the same
// idea beside this one, and this run's nodes that ended, newest last (at
// most 20).
func (e *engine) history(except string) string {
	var out []string
	if e.earlier != "" {
		out = append(out, "Earlier runs of this idea:\n"+e.earlier)
	}
	if run := e.runHistory(except); run != "" {
		out = append(out, "This run so far:\n"+run)
	}
	return strings.Join(out, "\n\n")
}

func (e *engine) runHistory(except string) string {
	nodes, more := e.tree.LastDone(promptNodes, except)
	var b strings.Builder
	if more > 0 {
		fmt.Fprintf(&b, "(%d earlier nodes left out)", more)
	}
	for _, n := range nodes {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.historyLine(n))
	}
	return b.String()
}

// historyLine is a finished node's line in the history: it does not
// change, and every node's Phase 0 lists the last promptNodes of them, so
// it is made once.
func (e *engine) historyLine(n tree.Node) string {
	if line, ok := e.texts.historyLines.Load(n.ID); ok {
		return line.(string)
	}
	line := fmt.Sprintf("- %s (%s, stage %s%s): %s", n.ID, n.Kind, search.StageName(max(n.Stage, 1)), parentText(n.Parent), e.outcomeText(n))
	if n.Done {
		e.texts.historyLines.Store(n.ID, line)
	}
	return line
}

func parentText(p string) string {
	if p == "" {
		return ""
	}
	return ", from " + p
}

func (e *engine) outcomeText(n tree.Node) string {
	switch {
	case !n.Done:
		return "running"
	case n.Buggy:
		return "buggy: " + textcut.FirstLine(n.Reason, 200)
	case n.HasMetric:
		return fmt.Sprintf("%s = %g %s", e.s.Spec.Metric.Name, n.Metric, e.s.Spec.Metric.Unit)
	}
	return "ok"
}

// changeIdea is the hyperparameter or ablation a node explores: the prompt
// asks the model for one its siblings have not tried, and lists theirs.
func (e *engine) changeIdea(n *tree.Node, what string) string {
	siblings, more := e.tree.LastSiblings(n.ID, promptNodes)
	var tried []string
	if more > 0 {
		tried = append(tried, fmt.Sprintf("- (%d earlier siblings left out)", more))
	}
	for _, s := range siblings {
		tried = append(tried, "- "+s.ID+": "+e.nodeSummary(s))
	}
	return prompt.Change(prompt.Kind(what), tried)
}

// nodeSummary is one line about a node: its plan's approach and outcome.
// A finished node's line does not change: it is read from its files once.
func (e *engine) nodeSummary(n tree.Node) string {
	if line, ok := e.texts.summaries.Load(n.ID); ok {
		return line.(string)
	}
	var s strings.Builder
	var o *rundir.Outcome
	if n.Done { // a running node has no summary yet
		o, _, _ = e.files.outcome(n.ID)
	}
	if o != nil && o.Summary != "" {
		s.WriteString(textcut.FirstLine(o.Summary, 200) + "; ")
	} else if a := e.approach(n.ID); a != "" {
		s.WriteString(a + "; ")
	}
	s.WriteString(e.outcomeText(n))
	if n.Done {
		e.texts.summaries.Store(n.ID, s.String())
	}
	return s.String()
}

// approach is the first line of the node's plan's approach, "" before its
// plan is written (siblings still running are listed in change prompts:
// their line is read from disk once, not once per prompt).
func (e *engine) approach(id string) string {
	if a, ok := e.texts.approaches.Load(id); ok {
		return a.(string)
	}
	if e.isUnwritten(id) {
		return "" // in Phase 0: its plan is not written yet
	}
	data, err := e.readPlan(id)
	if err != nil {
		return ""
	}
	var p prompt.Plan
	if json.Unmarshal(data, &p) != nil || p.Approach == "" {
		return ""
	}
	a := textcut.FirstLine(p.Approach, 200)
	e.texts.approaches.Store(id, a)
	return a
}

// readPlan reads node id's Phase 0 plan: nodes/<id>/phase0_plan.json, or
// plans/<id>/phase0_plan.json in a run written before a node's files shared
// its directory (a resumed one).
func (e *engine) readPlan(id string) ([]byte, error) {
	data, err := fileio.ReadFile(filepath.Join(e.s.Dir, nodesDir, id, planFile))
	if errors.Is(err, fs.ErrNotExist) && e.files.oldPlans {
		if old, oerr := os.ReadFile(rundir.Dir(e.s.Dir).Path(rundir.OldPhase0Plan(id))); oerr == nil {
			return old, nil
		}
	}
	return data, err
}

// hasOldPlans says whether the run in dir was written when Phase 0's files
// were in plans/<id>/.
func hasOldPlans(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, rundir.OldPlansDir))
	return err == nil && fi.IsDir()
}

// nodeContext is what node n's prompt is told: the environment, the
// resources, Phase 0's plan, its parent's code, output and feedback, the
// change a hyperparameter or ablation node makes, and its memory. Its error
// is the memory's.
func (e *engine) nodeContext(ctx context.Context, n *tree.Node, env, plan string) (prompt.Context, error) {
	pc := e.promptContext(ctx)
	pc.Environment, pc.Resources, pc.Phase0Plan = env, e.resources(ctx, n.ID), plan
	if n.Parent != "" {
		pc.Code = e.nodeCode(n.Parent)
		pc.ExecutionOutput = e.s.Section(ctx, e.nodeOutput(n.Parent), "results", "the execution output of a node: keep its errors, diagnostics and metrics")
		if n.Kind == search.Debug || n.Kind == search.Improve {
			pc.TimeFeedback, pc.PlotFeedback = e.feedback(n.Parent)
		}
	}
	switch n.Kind {
	case search.Hyperparam:
		pc.BaseCode, pc.Code, pc.Change = pc.Code, "", e.changeIdea(n, search.Hyperparam)
	case search.Ablation:
		pc.BaseCode, pc.Code, pc.Change = pc.Code, "", e.changeIdea(n, search.Ablation)
	case search.Draft:
		pc.ExecutionOutput = ""
	}
	if e.s.Memory != nil {
		text, err := e.injectMemory(ctx, n.ID, n.Kind)
		if err != nil {
			return pc, err
		}
		pc.Memory = text
	}
	return pc, nil
}

// nodeTexts keeps what the prompts say of each node once made.
type nodeTexts struct {
	// summaries holds nodeSummary's line of each finished node, and
	// historyLines its historyLine.
	summaries, historyLines sync.Map
	// approaches: node id -> the first line of its plan's approach, kept
	// once read (a plan does not change after Phase 0).
	approaches sync.Map
}
