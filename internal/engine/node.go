package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hpcq/hpcq/internal/bufpool"
	"github.com/hpcq/hpcq/internal/dispatch"
	"github.com/hpcq/hpcq/internal/fileio"
	"github.com/hpcq/hpcq/internal/hostbound"
	"github.com/hpcq/hpcq/internal/jsonw"
	"github.com/hpcq/hpcq/internal/prompt"
	"github.com/hpcq/hpcq/internal/search"
	"github.com/hpcq/hpcq/internal/textcut"
	"github.com/hpcq/hpcq/internal/tree"
	"github.com/hpcq/hpcq/pkg/llm"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// Files of a node, under nodes/<id>/.
const (
	taskFile    = rundir.TaskFile   // the task as published: written before the publish
	outcomeFile = rundir.ResultFile // how the node ended: written before the journal records it
	planFile    = rundir.Phase0Plan // written last of Phase 0's files: a resume finds Phase 0 done
)

// searchResult is what the search learns of an outcome (none: nothing).
func searchResult(o *rundir.Outcome) search.Result {
	if o == nil {
		return search.Result{}
	}
	r := search.Result{Buggy: o.Buggy, Reason: o.Reason, NotRun: o.NotRun}
	if o.Metric != nil {
		r.Metric, r.HasMetric = *o.Metric, true
		if s := o.Spread; s != nil {
			r.Q1, r.Q3, r.HasSpread = s.Q1, s.Q3, true
		}
	}
	return r
}

// runner runs one node of the search (search.Runner).
type runner struct{ e *engine }

func (r *runner) Run(ctx context.Context, n *tree.Node) (search.Result, error) {
	e := r.e
	defer e.s.SaveUsage()
	ended, published, err := e.openNode(n.ID)
	if err != nil || ended != nil {
		// Ended before a crash that came before the journal recorded it.
		return searchResult(ended), err
	}
	var task schema.NodeTask
	if published != nil {
		task = *published
	} else {
		t, why, err := r.prepare(ctx, n)
		if err != nil {
			return search.Result{}, err // ctx ended: the node stays unfinished
		}
		if why != "" {
			return r.end(ctx, n, nil, rundir.Outcome{Node: n.ID, Buggy: true, NotRun: true, Reason: why})
		}
		task = *t
		if err := e.files.saveTask(n.ID, &task); err != nil {
			return search.Result{}, err
		}
	}
	key := search.CacheKey(&task, e.currentEnv().toolchains)
	if res, hit := e.cache.Get(key); hit {
		res.RunID, res.NodeID, res.Attempt = e.s.RunID, task.NodeID, task.Attempt
		// The files are those of the node that ran, not of this one.
		res.Artifacts, res.ArtifactsNote = nil, "not run: the result of an identical earlier node was reused; its files are in that node's directory"
		o := e.evaluate(n.ID, &res, nil)
		o.Cached = true
		e.s.Log.Info("result cache hit: the node was not run again", "node_id", n.ID)
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
		return r.end(ctx, n, &task, rundir.Outcome{Node: n.ID, Buggy: true, Reason: "publish: " + err.Error()})
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
	o := r.assess(ctx, n, e.evaluate(n.ID, got.Result, got.DeadLetter))
	o.Summary = r.summarize(ctx, n, o)
	if got.Result != nil {
		r.bringHome(ctx, n, got.Result, &o)
	}
	if got.Result != nil && got.Result.OK() {
		if err := e.cache.Put(key, *got.Result); err != nil {
			e.s.Log.Warn("result cache", "err", err)
		}
	}
	return r.end(ctx, n, &task, o)
}

// openNode makes node id's directory, or reads what it holds from before a
// crash: the node's outcome when it ended, else its task when it was
// published.
func (e *engine) openNode(id string) (ended *rundir.Outcome, published *schema.NodeTask, err error) {
	dir := filepath.Join(e.s.Dir, nodesDir, id)
	fresh, err := makeNodeDir(dir)
	if err != nil {
		return nil, nil, err
	}
	if fresh {
		e.own.Store(id, ownNode{})
		if e.s.Logs != nil {
			e.s.Logs.New(id)
		}
		return nil, nil, nil
	}
	e.own.Delete(id)
	if o, ok, err := rundir.Dir(e.s.Dir).ReadOutcome(id); err != nil || ok {
		return &o, nil, err
	}
	var t schema.NodeTask
	if ok, err := rundir.ReadJSON(filepath.Join(dir, taskFile), &t); err != nil || !ok {
		return nil, nil, err
	}
	return nil, &t, nil
}

// bringHome fetches the files of node n's result into its directory and
// has the vision model read its plots.
func (r *runner) bringHome(ctx context.Context, n *tree.Node, res *schema.NodeResult, o *rundir.Outcome) {
	e := r.e
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	if err := dispatch.FetchArtifacts(fctx, e.p.Queue, e.s.Dir, res); err != nil {
		o.ArtifactsError = err.Error()
		e.s.Log.Error("artifacts not fetched", "node_id", n.ID, "err", err)
	}
	cancel()
	if res.ArtifactsNote != "" {
		// The worker could not bring every file home (a size cap, an upload
		// that failed): the user learns it here, not only in result.json.
		e.s.Log.Warn("artifacts incomplete", "node_id", n.ID, "note", res.ArtifactsNote)
	}
	o.PlotAnalysis = r.analyzePlots(ctx, n, *o)
}

// evaluate turns a task's answer into the node's outcome.
func (e *engine) evaluate(node string, res *schema.NodeResult, dl *queue.DeadLetter) rundir.Outcome {
	o := rundir.Outcome{Node: node, Attempt: 1, Result: res, DeadLetter: dispatch.DeadLetterRecord(dl)}
	switch {
	case dl != nil:
		o.Buggy, o.Reason = true, "dead-lettered: "+dl.Reason
	case res == nil:
		o.Buggy, o.Reason = true, "no answer"
	case res.Error != nil && res.Error.Kind == schema.ErrKindCanceled:
		o.Buggy, o.NotRun, o.Canceled, o.Reason = true, true, true, res.Error.Message
	case res.Error != nil && res.Error.Kind == schema.ErrKindIncorrect:
		o.Buggy, o.Reason = true, res.Error.Message // the harness's words: "incorrect on N=1000: ..."
		if v, ok := res.Metrics[e.s.Spec.Metric.Name]; ok {
			o.SelfReported = &v // what it claimed, beside the harness's verdict
		}
	case res.Error != nil:
		o.Buggy, o.Reason = true, fmt.Sprintf("%s in %s: %s", res.Error.Kind, res.Error.Phase, res.Error.Message)
		if len(res.Diagnostics) > 0 {
			d := res.Diagnostics[0]
			o.Reason += fmt.Sprintf(" (%s:%d: %s)", d.File, d.Line, d.Message)
		}
	case res.Evaluation != nil && res.Evaluation.Stage == schema.EvalRun:
		// The program's own report, the median of its measured runs.
		o.Metric, o.MetricFrom, o.Spread = res.Evaluation.Metric, rundir.MetricFromRepeats, res.Evaluation.Spread
	case res.Evaluation != nil:
		// The harness's measure; what the program said of itself is kept
		// beside it, never ranked.
		o.Metric, o.MetricFrom, o.Spread = res.Evaluation.Metric, rundir.MetricFromEvaluator, res.Evaluation.Spread
		if v, ok := res.Metrics[e.s.Spec.Metric.Name]; ok {
			o.SelfReported = &v
		}
	default:
		v, ok := res.Metrics[e.s.Spec.Metric.Name]
		if !ok {
			var have []string
			for k := range res.Metrics {
				have = append(have, k)
			}
			sort.Strings(have)
			o.Buggy, o.Reason = true, fmt.Sprintf("the run reported no %q metric (it reported: %s)", e.s.Spec.Metric.Name, strings.Join(have, ", "))
		} else {
			o.Metric = &v
		}
	}
	hostbound.Judge(&o, res, e.s.Spec.Metric.Name, e.s.Spec.Metric.Limit())
	return o
}

// end records a node's outcome: the memory events, the results rows, and
// result.json (before the search journals it).
func (r *runner) end(ctx context.Context, n *tree.Node, task *schema.NodeTask, o rundir.Outcome) (search.Result, error) {
	e := r.e
	if ctx.Err() != nil && o.Result == nil && o.DeadLetter == nil {
		return search.Result{}, ctx.Err()
	}
	ctx = context.WithoutCancel(ctx)
	if e.s.Memory != nil {
		e.memoryAfter(ctx, n, task, o)
	}
	rows := results.Rows{}
	if o.Result != nil && !o.Cached && !e.p.WorkersWriteResults && task != nil {
		rows = results.AttemptRows(task, o.Result)
	}
	o.Seal()
	row := results.Node{Run: e.s.RunID, Node: n.ID, Parent: n.Parent, Stage: max(n.Stage, 1), Kind: n.Kind, Pool: e.s.Spec.Pool, Attempt: 1,
		Status: o.Status, ErrorKind: o.ErrorKind, MetricName: e.s.Spec.Metric.Name, TS: time.Now(), MetricFrom: o.MetricFrom, SelfReported: o.SelfReported}
	if o.Metric != nil && !o.Buggy {
		row.MetricValue = o.Metric
		row.SetSpread(o.Spread)
		row.SetBound(o.Bound)
	}
	rows.Nodes = append(rows.Nodes, row)
	e.s.Metrics.Node(n.Kind, row.Status)
	// Stored before result.json is written (a resume takes a node with
	// one for done, its rows included), in one transaction with the other
	// nodes ending within results.WriteGather.
	if err := e.s.Rows.Write(ctx, rows); err != nil {
		e.s.Log.Warn("results rows not written", "node_id", n.ID, "err", err)
	}
	if err := e.saveOutcome(n.ID, &o); err != nil {
		return search.Result{}, err
	}
	if r := o.Result; r != nil && r.Container != nil && len(r.Toolchain) > 0 {
		tools := r.Toolchain
		e.imageTools.Store(&tools)
	}
	if e.s.Logs != nil {
		e.s.Logs.Done(n.ID)
	}
	e.s.Log.Info("node finished", "node_id", n.ID, "kind", n.Kind, "stage", n.Stage, "buggy", o.Buggy, "reason", textcut.FirstLine(o.Reason, 200),
		"metric", metricText(o.Metric), "cached", o.Cached)
	return searchResult(&o), nil
}

// memoryLost reports whether the memory store has lost the run's memory:
// its root branch, which every run has from its start, is gone.
func (e *engine) memoryLost(ctx context.Context) bool {
	if e.s.Store == nil {
		return false
	}
	_, err := e.s.Store.BranchGet(ctx, RootBranch)
	return errors.Is(err, memory.ErrNoBranch)
}

// prepare writes a node: its memory branch, its Phase 0 plan, its code. A
// non-empty why makes the node buggy without running it (the model gave
// nothing usable, the budget is spent); an error means ctx ended.
func (r *runner) prepare(ctx context.Context, n *tree.Node) (*schema.NodeTask, string, error) {
	e := r.e
	parent := RootBranch
	if n.Parent != "" {
		parent = n.Parent
	}
	fail := func(stage string, err error) (*schema.NodeTask, string, error) {
		if errors.Is(err, memory.ErrNoBranch) && e.memoryLost(ctx) {
			err = fmt.Errorf("%w (its root branch is gone: did Redis restart without its data? restore it, then resume the run): %w", memory.ErrLost, err)
			e.s.Log.Error("memory lost", "err", err)
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
	if e.s.Store != nil {
		// No new node starts while the memory store is away.
		if err := e.s.Store.Wait(ctx); err != nil {
			return fail("memory", err)
		}
	}
	if err := e.forkBranch(ctx, n, parent); err != nil {
		return fail("memory", err)
	}
	e.refreshEnvironment(ctx)
	env := e.currentEnv()
	plan, err := r.phase0(ctx, n)
	if err != nil {
		return fail("phase 0", err)
	}
	layers, layersText := e.inheritedLayers(n)
	pc, err := e.nodeContext(ctx, n, env.text+layersText, plan)
	if err != nil {
		return fail("memory", err)
	}
	msgs, err := prompt.Build(prompt.Kind(n.Kind), pc)
	if err != nil {
		return fail("prompt", err)
	}
	a, err := prompt.Generate(ctx, r.params(n, n.Kind, msgs))
	if err != nil {
		return fail(n.Kind, err)
	}
	t := &schema.NodeTask{V: schema.Version, RunID: e.s.RunID, NodeID: n.ID, Attempt: 1, ParentID: n.Parent, BranchID: n.ID,
		Stage: max(n.Stage, 1), Kind: n.Kind, Pool: e.s.Spec.Pool, Artifacts: a.Phases, Limits: e.s.Spec.Limits, Requires: e.s.Spec.Requires,
		Shell: e.s.Spec.Shell, Container: e.s.Spec.Container.Task(), Evaluate: e.harness, Measure: e.s.Spec.Measure(),
		Exclusive: e.s.Spec.Evaluation.Exclusive}
	if t.Container != nil {
		t.Container.Layers = layers
	}
	if e.s.Memory != nil {
		// The worker appends the node's phase events to its branch as they
		// happen (the branch exists: forked above).
		redact := e.s.Spec.Memory.Config.RedactSecrets
		t.Recall = &schema.TaskRecall{RedactSecrets: redact == nil || *redact}
	}
	e.iterativeInstall(ctx, n, t, a.Notes)
	if err := t.Validate(); err != nil {
		return fail("task", err)
	}
	if err := e.codeGenerated(ctx, n, a.Phases); err != nil {
		return fail("memory", err)
	}
	return t, "", nil
}

func (r *runner) params(n *tree.Node, purpose string, msgs []llm.Message) prompt.GenerateParams {
	e := r.e
	p := prompt.GenerateParams{Client: e.s.Client, Messages: msgs, Retries: e.s.Spec.LLM.Retries, Purpose: purpose, Node: n.ID}
	if e.s.Spec.LLM.Retries == 0 {
		p.Retries = -1 // Generate reads 0 as its default
	}
	if e.s.Memory != nil {
		p.Memory, p.Branch, p.RequireMemoryUpdate = e.s.Memory, n.ID, true
	}
	if e.s.Logs != nil {
		p.Observe = func(x prompt.Exchange) {
			if err := e.s.Logs.Write(n.ID, purpose, x); err != nil {
				e.s.Log.Warn("prompt log", "err", err)
			}
		}
	}
	return p
}

// phase0 plans the node (seed 000: once per node, with the history of the
// run so far) and writes nodes/<id>/phase0_plan.json, the raw reply and
// what the prompt was given.
func (r *runner) phase0(ctx context.Context, n *tree.Node) (string, error) {
	e := r.e
	dir := filepath.Join(e.s.Dir, nodesDir, n.ID)
	if !e.isUnwritten(n.ID) {
		if data, err := e.readPlan(n.ID); err == nil {
			return string(data), nil
		}
	}
	env := e.currentEnv()
	pc := e.promptContext(ctx)
	_, layersText := e.inheritedLayers(n)
	pc.History, pc.Environment, pc.Resources = e.history(n.ID), env.text+layersText, e.resources(ctx, n.ID)
	if e.s.Memory != nil {
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
	e.texts.approaches.Store(n.ID, textcut.FirstLine(plan.Approach, 200))
	if e.s.Memory != nil {
		if err := e.memoryPhase0(ctx, n.ID, payload, plan); err != nil {
			e.s.Log.Warn("phase 0 not kept in memory", "node_id", n.ID, "err", err)
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

// installMemoryChars is the budget of the memory the installer sees.
const installMemoryChars = 6000

// maxSnapshotChars bounds a code snapshot in archival memory.
const maxSnapshotChars = 32 << 10

// promptNodes bounds the nodes a prompt lists (the run so far, a node's
// siblings): the latest ones, and how many more there were.
const promptNodes = 20

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
