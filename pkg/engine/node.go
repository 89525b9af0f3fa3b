package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hpcq/hpcq/internal/bufpool"
	"github.com/hpcq/hpcq/internal/fileio"
	"github.com/hpcq/hpcq/internal/jsonw"
	"github.com/hpcq/hpcq/internal/textcut"
	"github.com/hpcq/hpcq/pkg/dispatch"
	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/prompt"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/run"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
	"github.com/hpcq/hpcq/pkg/search"
)

// Files of a node, under nodes/<id>/.
const (
	taskFile    = rundir.TaskFile   // the task as published: written before the publish
	outcomeFile = rundir.ResultFile // how the node ended: written before the journal records it
	planFile    = rundir.Phase0Plan // written last of Phase 0's files: a resume finds Phase 0 done
)

// outcome is result.json: the task's result or dead letter, or why the
// node never ran.
type outcome struct {
	Node       string             `json:"node"`
	NotRun     bool               `json:"not_run,omitempty"`
	Buggy      bool               `json:"buggy"`
	Reason     string             `json:"reason,omitempty"`
	Metric     *float64           `json:"metric,omitempty"`
	Cached     bool               `json:"cached,omitempty"`
	Result     *schema.NodeResult `json:"result,omitempty"`
	DeadLetter *queue.DeadLetter  `json:"dead_letter,omitempty"`
	// ArtifactsError says which files of the result could not be fetched
	// into the node's directory, and why.
	ArtifactsError string `json:"artifacts_error,omitempty"`
	// Canceled: scheduler cancel stopped the node (before or while it ran).
	Canceled bool `json:"canceled,omitempty"`
	// MetricFrom says where the metric came from when not from the run's
	// own METRIC lines or patterns ("parse_metrics": the model read it).
	MetricFrom string `json:"metric_from,omitempty"`
	// Review is the execution review's verdict, when one was asked.
	Review *prompt.Review `json:"review,omitempty"`
	// Summary is the model's summary of the node (node_summary).
	Summary string `json:"summary,omitempty"`
	// PlotAnalysis is the vision model's analysis of the node's plots.
	PlotAnalysis string `json:"plot_analysis,omitempty"`
}

func (o outcome) searchResult() search.Result {
	r := search.Result{Buggy: o.Buggy, Reason: o.Reason, NotRun: o.NotRun}
	if o.Metric != nil {
		r.Metric, r.HasMetric = *o.Metric, true
	}
	return r
}

// runner runs one node of the search (search.Runner).
type runner struct{ e *engine }

func (r *runner) Run(ctx context.Context, n *search.Node) (search.Result, error) {
	e := r.e
	defer e.usage.save()
	dir := filepath.Join(e.dir, nodesDir, n.ID)
	fresh, err := makeNodeDir(dir)
	if err != nil {
		return search.Result{}, err
	}
	var o outcome
	var task schema.NodeTask
	ok := false
	if fresh {
		e.own.Store(n.ID, ownNode{})
		if e.logs != nil {
			e.logs.New(n.ID)
		}
	} else {
		e.own.Delete(n.ID)
		if ok, err := readJSON(filepath.Join(dir, outcomeFile), &o); err != nil || ok {
			// Ended before a crash that came before the journal recorded it.
			return o.searchResult(), err
		}
		if ok, err = readJSON(filepath.Join(dir, taskFile), &task); err != nil {
			return search.Result{}, err
		}
	}
	if !ok {
		t, why, err := r.prepare(ctx, n)
		if err != nil {
			return search.Result{}, err // ctx ended: the node stays unfinished
		}
		if why != "" {
			o = outcome{Node: n.ID, Buggy: true, NotRun: true, Reason: why}
			return r.end(ctx, n, nil, o)
		}
		task = *t
		if err := e.saveTask(n.ID, &task); err != nil {
			return search.Result{}, err
		}
	}
	key := search.CacheKey(&task, e.currentEnv().toolchains)
	if res, hit := e.cache.Get(key); hit {
		res.RunID, res.NodeID, res.Attempt = e.runID, task.NodeID, task.Attempt
		// The files are those of the node that ran, not of this one.
		res.Artifacts, res.ArtifactsNote = nil, "not run: the result of an identical earlier node was reused; its files are in that node's directory"
		o = e.evaluate(n.ID, &res, nil)
		o.Cached = true
		e.log.Info("result cache hit: the node was not run again", "node_id", n.ID)
		return r.end(ctx, n, &task, o)
	}
	canceled, why := e.nodeCanceled(n.ID)
	select {
	case <-canceled:
		return r.end(ctx, n, &task, canceledOutcome(n.ID, why()))
	default:
	}
	ch, err := e.disp.Submit(ctx, &task)
	if err == nil {
		e.published.Store(n.ID, struct{}{})
		defer e.published.Delete(n.ID)
	}
	if err != nil {
		if ctx.Err() != nil {
			return search.Result{}, ctx.Err()
		}
		return r.end(ctx, n, &task, outcome{Node: n.ID, Buggy: true, Reason: "publish: " + err.Error()})
	}
	var got dispatch.Outcome
	select {
	case got = <-ch:
	case <-canceled:
		// The worker stops it (or answers it without running it); its
		// answer is not waited for.
		return r.end(ctx, n, &task, canceledOutcome(n.ID, why()))
	case <-ctx.Done():
		return search.Result{}, ctx.Err()
	}
	o = r.assess(ctx, n, e.evaluate(n.ID, got.Result, got.DeadLetter))
	o.Summary = r.summarize(ctx, n, o)
	if got.Result != nil {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		if err := dispatch.FetchArtifacts(fctx, e.p.Queue, e.dir, got.Result); err != nil {
			o.ArtifactsError = err.Error()
			e.log.Error("artifacts not fetched", "node_id", n.ID, "err", err)
		}
		cancel()
		if got.Result.ArtifactsNote != "" {
			// The worker could not bring every file home (a size cap, an
			// upload that failed): the user learns it here, not only in
			// result.json.
			e.log.Warn("artifacts incomplete", "node_id", n.ID, "note", got.Result.ArtifactsNote)
		}
		o.PlotAnalysis = r.analyzePlots(ctx, n, o)
	}
	if got.Result != nil && got.Result.OK() {
		if err := e.cache.Put(key, *got.Result); err != nil {
			e.log.Warn("result cache", "err", err)
		}
	}
	return r.end(ctx, n, &task, o)
}

// evaluate turns a task's answer into the node's outcome.
func (e *engine) evaluate(node string, res *schema.NodeResult, dl *queue.DeadLetter) outcome {
	o := outcome{Node: node, Result: res, DeadLetter: dl}
	switch {
	case dl != nil:
		o.Buggy, o.Reason = true, "dead-lettered: "+dl.Reason
	case res == nil:
		o.Buggy, o.Reason = true, "no answer"
	case res.Error != nil && res.Error.Kind == schema.ErrKindCanceled:
		o.Buggy, o.NotRun, o.Canceled, o.Reason = true, true, true, res.Error.Message
	case res.Error != nil:
		o.Buggy, o.Reason = true, fmt.Sprintf("%s in %s: %s", res.Error.Kind, res.Error.Phase, res.Error.Message)
		if len(res.Diagnostics) > 0 {
			d := res.Diagnostics[0]
			o.Reason += fmt.Sprintf(" (%s:%d: %s)", d.File, d.Line, d.Message)
		}
	default:
		v, ok := res.Metrics[e.spec.Metric.Name]
		if !ok {
			var have []string
			for k := range res.Metrics {
				have = append(have, k)
			}
			sort.Strings(have)
			o.Buggy, o.Reason = true, fmt.Sprintf("the run reported no %q metric (it reported: %s)", e.spec.Metric.Name, strings.Join(have, ", "))
		} else {
			o.Metric = &v
		}
	}
	return o
}

// end records a node's outcome: the memory events, the results rows, and
// result.json (before the search journals it).
func (r *runner) end(ctx context.Context, n *search.Node, task *schema.NodeTask, o outcome) (search.Result, error) {
	e := r.e
	if ctx.Err() != nil && o.Result == nil && o.DeadLetter == nil {
		return search.Result{}, ctx.Err()
	}
	ctx = context.WithoutCancel(ctx)
	if e.mem != nil {
		e.memoryAfter(ctx, n, task, o)
	}
	rows := results.Rows{}
	if o.Result != nil && !o.Cached && !e.p.WorkersWriteResults && task != nil {
		rows = results.FromResult(task, o.Result)
	}
	row := results.Node{Run: e.runID, Node: n.ID, Parent: n.Parent, Stage: max(n.Stage, 1), Kind: n.Kind, Pool: e.spec.Pool, Attempt: 1,
		Status: results.NodeOK, MetricName: e.spec.Metric.Name, TS: time.Now()}
	switch {
	case o.Canceled:
		row.Status, row.ErrorKind = results.NodeCanceled, schema.ErrKindCanceled
	case o.Buggy && o.DeadLetter != nil:
		row.Status, row.ErrorKind = results.NodeDeadLettered, results.ErrKindDeadLetter
	case o.Buggy && o.Result != nil && o.Result.Error != nil:
		row.Status, row.ErrorKind = results.NodeFailed, o.Result.Error.Kind
	case o.Buggy && task == nil:
		row.Status, row.ErrorKind = results.NodeNotRun, results.ErrKindLLM
	case o.Buggy:
		row.Status, row.ErrorKind = results.NodeFailed, results.ErrKindMetric
	case o.Cached:
		row.Status = results.NodeCached
	}
	if o.Metric != nil && !o.Buggy {
		row.MetricValue = o.Metric
	}
	rows.Nodes = append(rows.Nodes, row)
	e.p.Metrics.Node(n.Kind, row.Status)
	// Stored before result.json is written (a resume takes a node with
	// one for done, its rows included), in one transaction with the other
	// nodes ending within results.WriteGather.
	if err := e.rows.Write(ctx, rows); err != nil {
		e.log.Warn("results rows not written", "node_id", n.ID, "err", err)
	}
	if err := e.saveOutcome(n.ID, &o); err != nil {
		return search.Result{}, err
	}
	if e.logs != nil {
		e.logs.Done(n.ID)
	}
	e.log.Info("node finished", "node_id", n.ID, "kind", n.Kind, "stage", n.Stage, "buggy", o.Buggy, "reason", firstLine(o.Reason),
		"metric", metricText(o.Metric), "cached", o.Cached)
	return o.searchResult(), nil
}

// memoryLost reports whether the memory store has lost the run's memory:
// its root branch, which every run has from its start, is gone.
func (e *engine) memoryLost(ctx context.Context) bool {
	if e.outage == nil {
		return false
	}
	_, err := e.outage.BranchGet(ctx, RootBranch)
	return errors.Is(err, memory.ErrNoBranch)
}

// prepare writes a node: its memory branch, its Phase 0 plan, its code. A
// non-empty why makes the node buggy without running it (the model gave
// nothing usable, the budget is spent); an error means ctx ended.
func (r *runner) prepare(ctx context.Context, n *search.Node) (*schema.NodeTask, string, error) {
	e := r.e
	parent := RootBranch
	if n.Parent != "" {
		parent = n.Parent
	}
	fail := func(stage string, err error) (*schema.NodeTask, string, error) {
		if errors.Is(err, memory.ErrNoBranch) && e.memoryLost(ctx) {
			err = fmt.Errorf("%w (its root branch is gone: did Redis restart without its data? restore it, then resume the run): %w", memory.ErrLost, err)
			e.log.Error("memory lost", "err", err)
		}
		if errors.Is(err, memory.ErrOutage) || errors.Is(err, memory.ErrLost) {
			// Not the node's fault: the run stops, resumable, and the node
			// is prepared again when it resumes.
			e.outageStop.Store(true)
			e.cancel(fmt.Errorf("%s: %w", stage, err))
			return nil, "", err
		}
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		return nil, stage + ": " + err.Error(), nil
	}
	if e.outage != nil {
		// No new node starts while the memory store is away.
		if err := e.outage.Wait(ctx); err != nil {
			return fail("memory", err)
		}
	}
	if e.mem != nil {
		_, err := e.mem.Fork(ctx, n.ID, parent)
		redo := errors.Is(err, memory.ErrBranchExists) // a resumed run doing the node again
		if err != nil && !redo {
			return fail("memory", err)
		}
		created := false
		if redo {
			if created, err = e.hasEvent(ctx, n.ID, "node_created"); err != nil {
				return fail("memory", err)
			}
		}
		payload := fmt.Sprintf("%s node %s created in stage %s", n.Kind, n.ID, search.StageName(max(n.Stage, 1)))
		if n.Parent != "" {
			payload += " from " + n.Parent
		}
		if !created {
			if _, err := e.mem.RecallAppend(ctx, n.ID, memory.RecallEvent{Kind: "node_created", NodeID: n.ID, Payload: payload}); err != nil {
				return fail("memory", err)
			}
		}
	}
	e.refreshEnvironment(ctx)
	env := e.currentEnv()
	plan, err := r.phase0(ctx, n)
	if err != nil {
		return fail("phase 0", err)
	}
	pc := e.promptContext(ctx)
	pc.Environment, pc.Resources, pc.Phase0Plan = env.text, e.resources(ctx, n.ID), plan
	if n.Parent != "" {
		pc.Code = e.nodeCode(n.Parent)
		pc.ExecutionOutput = e.section(ctx, e.nodeOutput(n.Parent), "results", "the execution output of a node: keep its errors, diagnostics and metrics")
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
	if e.mem != nil {
		text, err := e.injectMemory(ctx, n.ID, n.Kind)
		if err != nil {
			return fail("memory", err)
		}
		pc.Memory = text
	}
	msgs, err := prompt.Build(prompt.Kind(n.Kind), pc)
	if err != nil {
		return fail("prompt", err)
	}
	a, err := prompt.Generate(ctx, r.params(n, n.Kind, msgs))
	if err != nil {
		return fail(n.Kind, err)
	}
	t := &schema.NodeTask{V: schema.Version, RunID: e.runID, NodeID: n.ID, Attempt: 1, ParentID: n.Parent, BranchID: n.ID,
		Stage: max(n.Stage, 1), Kind: n.Kind, Pool: e.spec.Pool, Artifacts: a.Phases, Limits: e.spec.Limits, Requires: e.spec.Requires,
		Shell: e.spec.Shell}
	if e.mem != nil {
		// The worker appends the node's phase events to its branch as they
		// happen (the branch exists: forked above).
		redact := e.spec.Memory.Config.RedactSecrets
		t.Recall = &schema.TaskRecall{RedactSecrets: redact == nil || *redact}
	}
	if dl := a.Phases.Download.Commands; e.spec.Phase1.Mode == "iterative" && len(dl) > 0 {
		// The planned download commands become the goal of the worker's
		// iterative installer, which runs them one at a time under the
		// model's eye and adapts when one fails.
		goal := "Run or adapt these planned commands:\n" + strings.Join(dl, "\n")
		for _, note := range a.Notes {
			if strings.HasPrefix(note, "download: ") {
				goal = strings.TrimPrefix(note, "download: ") + "\n\n" + goal
			}
		}
		t.Install = &schema.Install{Goal: goal, MaxSteps: e.spec.Phase1.MaxSteps}
		if e.mem != nil {
			// The installer sees the node's memory: what earlier nodes
			// found installed, missing or broken.
			if rd, err := e.mem.RenderForPrompt(ctx, n.ID, "install download setup "+goal, installMemoryChars); err == nil {
				t.Install.Memory = rd.Text
			} else {
				e.log.Warn("memory not rendered for the installer", "node_id", n.ID, "err", err)
			}
		}
		t.Artifacts.Download.Commands = nil
	}
	if err := t.Validate(); err != nil {
		return fail("task", err)
	}
	if e.mem != nil {
		files := make([]string, 0, len(a.Phases.Coding.Workspace.Files))
		for _, f := range a.Phases.Coding.Workspace.Files {
			files = append(files, fmt.Sprintf("%s (%d bytes)", f.Path, len(f.Content)))
		}
		payload := fmt.Sprintf("%s code: %s; commands: download %d, compile %d, run %d", n.Kind, strings.Join(files, ", "),
			len(a.Phases.Download.Commands), len(a.Phases.Compile.Commands), len(a.Phases.Run.Commands))
		if _, err := e.mem.RecallAppend(ctx, n.ID, memory.RecallEvent{Kind: "code_generated", NodeID: n.ID, Phase: schema.PhaseCoding,
			Payload: payload}); err != nil {
			return fail("memory", err)
		}
	}
	return t, "", nil
}

func (r *runner) params(n *search.Node, purpose string, msgs []llm.Message) prompt.GenerateParams {
	e := r.e
	p := prompt.GenerateParams{Client: e.client, Messages: msgs, Retries: e.spec.LLM.Retries, Purpose: purpose, Node: n.ID}
	if e.spec.LLM.Retries == 0 {
		p.Retries = -1 // Generate reads 0 as its default
	}
	if e.mem != nil {
		p.Memory, p.Branch, p.RequireMemoryUpdate = e.mem, n.ID, true
	}
	if e.logs != nil {
		p.Observe = func(x prompt.Exchange) {
			if err := e.logs.Write(n.ID, purpose, x); err != nil {
				e.log.Warn("prompt log", "err", err)
			}
		}
	}
	return p
}

// phase0 plans the node (seed 000: once per node, with the history of the
// run so far) and writes nodes/<id>/phase0_plan.json, the raw reply and
// what the prompt was given.
func (r *runner) phase0(ctx context.Context, n *search.Node) (string, error) {
	e := r.e
	dir := filepath.Join(e.dir, nodesDir, n.ID)
	if !e.isUnwritten(n.ID) {
		if data, err := e.readPlan(n.ID); err == nil {
			return string(data), nil
		}
	}
	env := e.currentEnv()
	pc := e.promptContext(ctx)
	pc.History, pc.Environment, pc.Resources = e.history(n.ID), env.text, e.resources(ctx, n.ID)
	if e.mem != nil {
		text, err := e.injectMemory(ctx, n.ID, "phase0")
		if err != nil {
			return "", err
		}
		pc.Memory = text
	}
	msgs, err := prompt.Build(prompt.Phase0, pc)
	if err != nil {
		return "", err
	}
	var plan prompt.Plan
	payload, err := prompt.Ask(ctx, r.params(n, "phase0", msgs), `one JSON object {"plan": {...}}`, func(s string) error {
		var err error
		plan, err = prompt.ParsePlan(s)
		return err
	})
	if err != nil {
		return "", err
	}
	// The raw reply and what Phase 0 was given (seed 000's
	// phase0_history_full.json) are records written once: a crash cutting
	// one short is followed by Phase 0 asked again and the file written
	// again, as the plan, written last and whole, is not there.
	if err := fileio.WriteFile(filepath.Join(dir, rundir.Phase0Reply), []byte(payload), 0o644); err != nil {
		return "", err
	}
	given := bufpool.Get()
	*given = appendPhase0Given(*given, pc)
	err = fileio.WriteFile(filepath.Join(dir, rundir.Phase0Given), *given, 0o644)
	bufpool.Put(given)
	if err != nil {
		return "", err
	}
	if err := fileio.WriteFileAtomic(filepath.Join(dir, planFile), append(plan.Raw, '\n')); err != nil {
		return "", err
	}
	e.approaches.Store(n.ID, firstLine(plan.Approach))
	if e.mem != nil {
		if err := e.memoryPhase0(ctx, n.ID, payload, plan); err != nil {
			e.log.Warn("phase 0 not kept in memory", "node_id", n.ID, "err", err)
		}
	}
	return string(plan.Raw), nil
}

// appendPhase0Given appends phase0_history_full.json: what Phase 0 was
// given, as json.MarshalIndent writes it for a map of the four texts (keys
// sorted), and a newline; written directly, not indented in a second pass
// over texts of tens of kilobytes.
func appendPhase0Given(dst []byte, pc prompt.Context) []byte {
	dst = append(dst, "{\n"...)
	for i, kv := range [...][2]string{{"environment", pc.Environment}, {"history", pc.History}, {"memory", pc.Memory}, {"resources", pc.Resources}} {
		if i > 0 {
			dst = append(dst, ",\n"...)
		}
		dst = append(append(append(dst, `  "`...), kv[0]...), `": `...)
		dst = jsonw.AppendString(dst, kv[1])
	}
	return append(dst, "\n}\n"...)
}

// hasEvent says whether branch wrote an event of kind itself (a node done
// again after a resume keeps the one node_created it had).
func (e *engine) hasEvent(ctx context.Context, branch, kind string) (bool, error) {
	evs, _, err := e.mem.RecallList(ctx, memory.RecallListParams{Branch: branch})
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
	rd, err := e.mem.RenderForPrompt(ctx, node, purpose, 0)
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
	if _, err := e.mem.RecallAppend(ctx, node, memory.RecallEvent{Kind: "memory_context_injected", NodeID: node, Payload: payload}); err != nil {
		return "", err
	}
	return rd.Text, nil
}

// promptContext is what every prompt of the run has: the research idea
// within its limit, run.yaml's system message and domain section, and
// whether the memory is on.
func (e *engine) promptContext(ctx context.Context) prompt.Context {
	return prompt.Context{Idea: e.ideaSection(ctx), System: e.spec.Prompt.System, Domain: e.spec.Prompt.Domain, WithMemory: e.mem != nil}
}

// feedback are the Time feedback and Plot feedback sections (seed 003) of
// a prompt about node id's code: how long its phases took against their
// limits, and the plots it wrote.
func (e *engine) feedback(id string) (timing, plots string) {
	o, ok, err := e.nodeOutcome(id)
	if err != nil || !ok || o.Result == nil {
		return "", ""
	}
	limits := map[string]int{schema.PhaseDownload: e.spec.Limits.DownloadTimeoutS, schema.PhaseCompile: e.spec.Limits.CompileTimeoutS,
		schema.PhaseRun: e.spec.Limits.RunTimeoutS}
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

// ideaSection is the Research idea section of the prompts: the idea within
// section_budgets.idea_section_limit.
func (e *engine) ideaSection(ctx context.Context) string {
	return e.section(ctx, e.spec.Idea, "idea_section_limit", "the research idea, for the prompt's Research idea section")
}

// memoryPhase0 keeps a node's Phase 0 in its branch, per the seed's
// toggles: the whole output in archival memory (PHASE0_INTERNAL), and the
// plan's summary in core (PHASE0_SUMMARY) unless the model wrote one for
// this node itself.
func (e *engine) memoryPhase0(ctx context.Context, node, output string, plan prompt.Plan) error {
	if run.On(e.spec.Memory.PersistPhase0Internal) {
		if _, _, err := e.mem.ArchivalWrite(ctx, memory.ArchivalWriteParams{Branch: node, Text: output, Tags: []string{"PHASE0_INTERNAL", "node:" + node},
			Context: "phase0"}); err != nil {
			return err
		}
	}
	if !run.On(e.spec.Memory.AlwaysInjectPhase0Summary) {
		return nil
	}
	if cur, ok, err := e.mem.CoreGet(ctx, node, "PHASE0_SUMMARY"); err != nil || (ok && cur.Branch == node) {
		return err
	}
	summary := e.section(ctx, plan.Summary(), "phase0_summary", "the node's Phase 0 plan: approach, toolchain, build, run, metric")
	_, err := e.mem.CoreSet(ctx, memory.CoreSetParams{Branch: node, Key: "PHASE0_SUMMARY", Value: summary, Importance: 5})
	return err
}

// memoryAfter writes the events of seed 003 for a node that ended: one per
// phase, node_result, and the [SUCCESS, stage:X] or [ERROR] archival entry.
func (e *engine) memoryAfter(ctx context.Context, n *search.Node, task *schema.NodeTask, o outcome) {
	stage := search.StageName(max(n.Stage, 1))
	warn := func(err error) {
		if err != nil {
			e.log.Warn("memory write after the node failed", "node_id", n.ID, "err", err)
		}
	}
	switch {
	case o.Result == nil || o.Cached:
	case task != nil && task.Recall != nil:
		// The worker stored the phase events as they happened; those it
		// could not store came back with the result.
		for _, ev := range o.Result.RecallPending {
			_, err := e.mem.RecallAppend(ctx, n.ID, memory.RecallEvent{Kind: ev.Kind, NodeID: n.ID, Phase: ev.Phase, Payload: ev.Payload})
			warn(err)
		}
	default:
		// A task published without Recall (a run resumed from an earlier
		// version): the events from the result, after the fact.
		for _, ph := range o.Result.Phases {
			kind, payload := "phase_complete", fmt.Sprintf("exit %d in %d ms", ph.ExitCode, ph.DurationMS)
			switch {
			case !ph.OK:
				kind = "error_encountered"
				payload += "\n" + tail(ph.LogTail, 1500)
			case ph.Name == schema.PhaseRun:
				kind = "execution_result"
				payload += "\n" + tail(ph.LogTail, 1500)
			}
			_, err := e.mem.RecallAppend(ctx, n.ID, memory.RecallEvent{Kind: kind, NodeID: n.ID, Phase: ph.Name, Payload: payload})
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
			changed, err := e.mem.RefreshResources(ctx, n.ID, cmds, ph.OK)
			warn(err)
			if len(changed) > 0 {
				_, err = e.mem.RecallAppend(ctx, n.ID, memory.RecallEvent{Kind: "resources_refreshed", NodeID: n.ID, Phase: schema.PhaseDownload,
					Payload: strings.Join(changed, "; ")})
				warn(err)
			}
		}
	}
	if o.Result != nil && !o.Cached {
		for _, a := range o.Result.Artifacts {
			if a.Kind == schema.ArtifactPlot {
				_, err := e.mem.RecallAppend(ctx, n.ID, memory.RecallEvent{Kind: "plot_generated", NodeID: n.ID, Phase: schema.PhaseRun,
					Payload: fmt.Sprintf("%s (%d bytes), in nodes/%s/outputs/", a.Name, a.Bytes, n.ID)})
				warn(err)
			}
		}
	}
	var text string
	var tags []string
	if o.Buggy {
		text = fmt.Sprintf("[ERROR] %s node %s (stage %s) failed: %s", n.Kind, n.ID, stage, o.Reason)
		tags = []string{"ERROR", "stage:" + stage}
		if o.Result != nil && o.Result.Error != nil {
			tags = append(tags, "phase:"+o.Result.Error.Phase)
		}
	} else {
		text = fmt.Sprintf("[SUCCESS, stage:%s] %s node %s: %s = %s %s", stage, n.Kind, n.ID, e.spec.Metric.Name, metricText(o.Metric), e.spec.Metric.Unit)
		if o.Cached {
			text += " (an identical earlier node's result, not run again)"
		}
		tags = []string{"SUCCESS", "stage:" + stage}
	}
	_, err := e.mem.RecallAppend(ctx, n.ID, memory.RecallEvent{Kind: "node_result", NodeID: n.ID, Payload: text})
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
			writes = append(writes, memory.ArchivalWriteParams{Text: cutText(code, maxSnapshotChars),
				Tags: []string{"code:" + n.ID, "stage:" + stage}, Context: "code of node " + n.ID})
		}
		res := e.section(ctx, e.outputText(o), "results", "the execution result of a node: keep its errors, diagnostics and metrics")
		if strings.TrimSpace(res) != "" {
			writes = append(writes, memory.ArchivalWriteParams{Text: res, Tags: []string{"results:" + n.ID, "stage:" + stage},
				Context: "results of node " + n.ID})
		}
	}
	warn(e.mem.ArchivalWrites(ctx, n.ID, writes))
	e.sweepMu.Lock()
	e.sweepPending = append(e.sweepPending, n.ID)
	e.sweepMu.Unlock()
	e.sweep(ctx, false)
}

// installMemoryChars is the budget of the memory the installer sees.
const installMemoryChars = 6000

// maxSnapshotChars bounds a code snapshot in archival memory.
const maxSnapshotChars = 32 << 10

// cutText cuts text to n bytes (on a rune boundary), marked.
func cutText(text string, n int) string {
	if len(text) <= n {
		return text
	}
	marker := fmt.Sprintf("\n[... cut to %d of %d chars ...]", n, len(text))
	return text[:textcut.Floor(text, n-len(marker))] + marker
}

// nodeCode is a node's files as a prompt shows them.
func (e *engine) nodeCode(id string) string { return e.codeText(id, false) }

// codeText is a node's files and commands in markdown: for a prompt, each
// file under a "###" heading of its path as it is; for the report (under
// its "### Its code"), under "####" with the path escaped.
func (e *engine) codeText(id string, report bool) string {
	t, ok, err := e.nodeTask(id)
	if err != nil || !ok {
		return ""
	}
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
	o, ok, err := e.nodeOutcome(id)
	if err != nil || !ok {
		return ""
	}
	return e.outputText(*o)
}

// outputText is how a node ended, as a prompt shows it.
func (e *engine) outputText(o outcome) string {
	var b strings.Builder
	if o.Buggy {
		fmt.Fprintf(&b, "The node failed: %s\n\n", o.Reason)
	} else if o.Metric != nil {
		fmt.Fprintf(&b, "The node ran: %s = %s %s\n\n", e.spec.Metric.Name, metricText(o.Metric), e.spec.Metric.Unit)
	}
	if res := o.Result; res != nil {
		for _, d := range res.Diagnostics {
			fmt.Fprintf(&b, "%s:%d:%d: %s: %s\n", d.File, d.Line, d.Column, d.Severity, d.Message)
		}
		for _, ph := range res.Phases {
			fmt.Fprintf(&b, "\n## %s (exit %d, %d ms)\n%s\n", ph.Name, ph.ExitCode, ph.DurationMS, tail(ph.LogTail, 3000))
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

// promptNodes bounds the nodes a prompt lists (the run so far, a node's
// siblings): the latest ones, and how many more there were.
const promptNodes = 20

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
func (e *engine) historyLine(n search.Node) string {
	if line, ok := e.historyLines.Load(n.ID); ok {
		return line.(string)
	}
	line := fmt.Sprintf("- %s (%s, stage %s%s): %s", n.ID, n.Kind, search.StageName(max(n.Stage, 1)), parentText(n.Parent), e.outcomeText(n))
	if n.Done {
		e.historyLines.Store(n.ID, line)
	}
	return line
}

func parentText(p string) string {
	if p == "" {
		return ""
	}
	return ", from " + p
}

func (e *engine) outcomeText(n search.Node) string {
	switch {
	case !n.Done:
		return "running"
	case n.Buggy:
		return "buggy: " + firstLine(n.Reason)
	case n.HasMetric:
		return fmt.Sprintf("%s = %g %s", e.spec.Metric.Name, n.Metric, e.spec.Metric.Unit)
	}
	return "ok"
}

// changeIdea is the hyperparameter or ablation a node explores: the prompt
// asks the model for one its siblings have not tried, and lists theirs.
func (e *engine) changeIdea(n *search.Node, what string) string {
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
func (e *engine) nodeSummary(n search.Node) string {
	if line, ok := e.summaries.Load(n.ID); ok {
		return line.(string)
	}
	var s strings.Builder
	var o *outcome
	if n.Done { // a running node has no summary yet
		o, _, _ = e.nodeOutcome(n.ID)
	}
	if o != nil && o.Summary != "" {
		s.WriteString(firstLine(o.Summary) + "; ")
	} else if a := e.approach(n.ID); a != "" {
		s.WriteString(a + "; ")
	}
	s.WriteString(e.outcomeText(n))
	if n.Done {
		e.summaries.Store(n.ID, s.String())
	}
	return s.String()
}

// approach is the first line of the node's plan's approach, "" before its
// plan is written (siblings still running are listed in change prompts:
// their line is read from disk once, not once per prompt).
func (e *engine) approach(id string) string {
	if a, ok := e.approaches.Load(id); ok {
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
	a := firstLine(p.Approach)
	e.approaches.Store(id, a)
	return a
}

// readPlan reads node id's Phase 0 plan: nodes/<id>/phase0_plan.json, or
// plans/<id>/phase0_plan.json in a run written before a node's files shared
// its directory (a resumed one).
func (e *engine) readPlan(id string) ([]byte, error) {
	data, err := fileio.ReadFile(filepath.Join(e.dir, nodesDir, id, planFile))
	if errors.Is(err, fs.ErrNotExist) && e.oldPlans {
		if old, oerr := os.ReadFile(rundir.Dir(e.dir).Path(rundir.OldPhase0Plan(id))); oerr == nil {
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

// bestDetail is the report's section on the best node: metrics and code.
func (e *engine) bestDetail(id string) string {
	var b strings.Builder
	o, ok, _ := e.nodeOutcome(id)
	if ok && o.Result != nil && len(o.Result.Metrics) > 0 {
		b.WriteString("### Its metrics\n\n| metric | value | unit |\n|---|---|---|\n")
		names := make([]string, 0, len(o.Result.Metrics))
		for k := range o.Result.Metrics {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			fmt.Fprintf(&b, "| %s | %g | %s |\n", k, o.Result.Metrics[k], o.Result.MetricUnits[k])
		}
		b.WriteString("\n")
	}
	if ok && o.Result != nil {
		b.WriteString(artifactLinks(id, *o))
	}
	if code := e.codeText(id, true); code != "" {
		b.WriteString("### Its code\n\n" + code + "\n")
	}
	return b.String()
}

// artifactLinks is markdown linking a node's logs and outputs in the run
// directory (report.md is at its top), its plots shown inline, and what
// did not come home.
func artifactLinks(id string, o outcome) string {
	var logs, outputs, plots []string
	for _, a := range o.Result.Artifacts {
		link := rundir.NodeFile(id, a.Dir(), a.Name)
		switch a.Kind {
		case schema.ArtifactLog:
			logs = append(logs, fmt.Sprintf("[%s](%s)", a.Name, mdURL(link)))
		case schema.ArtifactPlot:
			plots = append(plots, fmt.Sprintf("![%s](%s)", mdText(a.Name), mdURL(link)))
		default:
			outputs = append(outputs, fmt.Sprintf("[%s](%s)", mdText(a.Name), mdURL(link)))
		}
	}
	var b strings.Builder
	if len(logs)+len(outputs)+len(plots) > 0 || o.Result.ArtifactsNote != "" || o.ArtifactsError != "" {
		b.WriteString("### Its files\n\n")
	}
	if len(logs) > 0 {
		b.WriteString("Logs: " + strings.Join(logs, ", ") + "\n\n")
	}
	if len(outputs) > 0 {
		b.WriteString("Outputs: " + strings.Join(outputs, ", ") + "\n\n")
	}
	for _, p := range plots {
		b.WriteString(p + "\n\n")
	}
	if o.PlotAnalysis != "" {
		b.WriteString("What the vision model saw in the plots: " + mdText(o.PlotAnalysis) + "\n\n")
	}
	if o.Result.ArtifactsNote != "" {
		b.WriteString("Left out: " + mdText(o.Result.ArtifactsNote) + "\n\n")
	}
	if o.ArtifactsError != "" {
		b.WriteString("Not fetched: " + mdText(o.ArtifactsError) + "\n\n")
	}
	return b.String()
}

// mdURL escapes a relative path for a markdown link target.
func mdURL(p string) string {
	return (&url.URL{Path: p}).EscapedPath()
}

// codeBlock is content in a fenced markdown block (info string lang), the
// fence longer than any run of backticks in content, so that content
// cannot end the block early; it ends with a blank line.
func codeBlock(lang, content string) string {
	var b strings.Builder
	writeCodeBlock(&b, lang, content)
	return b.String()
}

// writeCodeBlock writes codeBlock(lang, content) to b.
func writeCodeBlock(b *strings.Builder, lang, content string) {
	longest, run := 0, 0
	for i := 0; i < len(content); i++ {
		if content[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	n := max(3, longest+1)
	b.Grow(2*n + len(lang) + len(content) + 4)
	for range n {
		b.WriteByte('`')
	}
	b.WriteString(lang)
	b.WriteByte('\n')
	b.WriteString(content)
	b.WriteByte('\n')
	for range n {
		b.WriteByte('`')
	}
	b.WriteString("\n\n")
}

// mdText keeps a file name or message from being read as markdown.
func mdText(s string) string {
	return strings.NewReplacer("\\", "\\\\", "[", "\\[", "]", "\\]", "*", "\\*", "_", "\\_", "`", "\\`", "<", "&lt;", "\n", " ").Replace(s)
}

// endedFromCache says whether node id was answered from the result cache:
// known for the nodes this process ended, read from result.json for those
// ended before it started (a resumed run).
func (e *engine) endedFromCache(id string) bool {
	if v, ok := e.own.Load(id); ok && v.(ownNode).ended {
		return v.(ownNode).cached
	}
	o, ok, _ := e.nodeOutcome(id)
	return ok && o.Cached
}

func metricText(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%g", *v)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// tail keeps the last n bytes of s, at a line start when it can.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
		s = s[i+1:]
	}
	return "...\n" + s
}

// makeNodeDir makes a node's directory; fresh says that this call made it
// (so the node has no files yet), not an earlier run of the node.
func makeNodeDir(dir string) (fresh bool, err error) {
	err = os.Mkdir(dir, 0o755)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrExist):
		return false, nil
	case errors.Is(err, fs.ErrNotExist):
		// nodes/ itself is missing (made at start: removed since?).
		return false, os.MkdirAll(dir, 0o755)
	}
	return false, err
}

// ownNode is what the engine knows of a node whose directory this process
// made (os.Mkdir made it: not a resumed node) or whose outcome it saved.
// Until a made node's outcome is saved none of its files is on disk but
// those this process wrote: its outcome is known to be absent, and its
// approach too until Phase 0 keeps it, so that the prompts listing running
// siblings do not look for files that are not there (they looked ten
// times per node). Once ended, whether the result cache answered it is
// kept for the run's summary.
type ownNode struct {
	ended, cached bool
}

// isUnwritten says that node id is one whose files this process makes
// and whose outcome it has not saved yet.
func (e *engine) isUnwritten(id string) bool {
	v, ok := e.own.Load(id)
	return ok && !v.(ownNode).ended
}

// readJSON reads a node file; ok is false when it does not exist.
func readJSON(path string, v any) (bool, error) {
	data, err := fileio.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	return true, nil
}

func writeJSON(path string, v any) error {
	data, err := jsonw.MarshalIndent(v)
	if err != nil {
		return err
	}
	return fileio.WriteFileAtomic(path, append(data, '\n'))
}
