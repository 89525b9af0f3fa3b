// The four stages of a run: how many nodes run at once, which node each
// stage starts from, the search of each.

package engine

import (
	"context"
	"fmt"
	"sort"

	"github.com/hpcq/hpcq/internal/prompt"
	"github.com/hpcq/hpcq/internal/search"
	"github.com/hpcq/hpcq/internal/tree"
	"github.com/hpcq/hpcq/pkg/memory"
)

// stageSlots is how many nodes run at once in the stage starting: the
// setting, else run.yaml's search.slots, else the slots of the pool's live
// workers as last read (workers started on demand may have registered since
// the run started), else defaultSlots.
func (e *engine) stageSlots() int {
	switch {
	case e.p.Slots > 0:
		return e.p.Slots
	case e.s.Spec.Search.Slots > 0:
		return e.s.Spec.Search.Slots
	}
	if env := e.currentEnv(); env.slots > 0 {
		return env.slots
	}
	return defaultSlots
}

// stages runs the four stages in order. Stage 2 and 4 start from the best
// node so far (the judge may pick it); stage 3 improves the best node.
func (e *engine) stages(ctx context.Context) (stoppedBy string, notes map[int]string) {
	notes = map[int]string{}
	iters := []int{e.s.Spec.Stages.InitialImplementation.MaxIterations, e.s.Spec.Stages.BaselineTuning.MaxIterations,
		e.s.Spec.Stages.CreativeResearch.MaxIterations, e.s.Spec.Stages.AblationStudies.MaxIterations}
	expand := []string{search.Improve, search.Hyperparam, search.Improve, search.Ablation}
	rn := &runner{e: e}
	for i, max := range iters {
		stage := i + 1
		if max == 0 || ctx.Err() != nil {
			continue
		}
		pol := search.Policy{Stage: stage, NumDrafts: e.s.Spec.Search.NumDrafts, DebugProb: *e.s.Spec.Search.DebugProb,
			MaxDebugDepth: e.s.Spec.Search.MaxDebugDepth, Maximize: e.maximize(), Expand: expand[i], ExpandBest: stage != 4,
			Stop: func() (bool, string) {
				if spent, why := e.s.Client.Spent(); spent {
					return true, "budget: " + why
				}
				return false, ""
			}}
		if stage > 1 {
			base, why, ok := e.stageBase(ctx, stage)
			if !ok {
				notes[stage] = "skipped: no node of the earlier stages produced the metric"
				e.s.Log.Warn("stage skipped: nothing to start from", "stage", search.StageName(stage))
				continue
			}
			pol.Base = base
			notes[stage] = fmt.Sprintf("started from %s (%s)", base, why)
		}
		e.stage.Store(&stageState{stage, search.StageName(stage)})
		if e.s.Memory != nil {
			if _, err := e.s.Memory.CoreSet(ctx, memory.CoreSetParams{Branch: RootBranch, Key: "CURRENT_STAGE", Value: search.StageName(stage), Importance: 3}); err != nil {
				e.s.Log.Warn("memory: CURRENT_STAGE not set", "err", err)
			}
		}
		e.s.Log.Info("stage", "stage", stage, "name", search.StageName(stage), "max_iterations", max, "base", pol.Base)
		e.slots = e.stageSlots()
		st := search.Run(ctx, e.tree, pol, rn, e.slots, max, search.Async)
		if err := e.tree.Err(); err != nil {
			return "journal: " + err.Error(), notes
		}
		if st.StoppedBy != "" {
			e.s.Log.Warn("search stopped", "reason", st.StoppedBy)
			return st.StoppedBy, notes
		}
	}
	return "", notes
}

// stageBase picks the node a stage starts from: the node a resumed stage
// already started from, else the best node so far (by the judge among the
// best few when search.judge is on).
func (e *engine) stageBase(ctx context.Context, stage int) (id, why string, ok bool) {
	for _, n := range e.tree.Nodes() {
		if n.Stage == stage && n.Kind != search.Debug && n.Parent != "" {
			return n.Parent, "as before the resume", true
		}
	}
	var cands []tree.Node
	for _, n := range e.tree.Nodes() {
		if n.Done && !n.Buggy && n.HasMetric && n.Stage < stage {
			cands = append(cands, n)
		}
	}
	if len(cands) == 0 {
		return "", "", false
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if e.maximize() {
			return cands[i].Metric > cands[j].Metric
		}
		return cands[i].Metric < cands[j].Metric
	})
	if !e.s.Spec.Search.Judge || len(cands) == 1 {
		// In creation order, a node beyond the noise of the best so far
		// takes its place (search.Better): no base chosen on luck.
		var best tree.Node
		for _, n := range e.tree.Nodes() {
			if n.Done && !n.Buggy && n.HasMetric && n.Stage < stage && (best.ID == "" || tree.Better(n, best, e.maximize())) {
				best = n
			}
		}
		return best.ID, "best " + e.s.Spec.Metric.Name, true
	}
	cands = cands[:min(len(cands), 4)]
	pc := make([]prompt.Candidate, len(cands))
	for i, n := range cands {
		pc[i] = prompt.Candidate{ID: n.ID, Metric: n.Metric, Summary: e.nodeSummary(n)}
	}
	best, reason := prompt.Judge(ctx, e.s.Client, e.s.Spec.Idea, e.s.Spec.Metric.Name, e.maximize(), pc)
	return best, "judge: " + reason, true
}
