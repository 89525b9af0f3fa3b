// Package engine is `scheduler run`: the engine that grows a run's experiment tree
// over the queue. For each node of each of the four stages it forks the
// node's memory branch, asks the model for a Phase 0 plan and for the
// node's code (prompts with memory, replies checked into phase artifacts),
// publishes the node's task, waits for its result, and writes the node's
// recall events and archival entries. The search is asynchronous: a node is
// chosen and published whenever a slot frees.
//
// Everything a resume needs is in the run directory: the tree's journal
// (every node state change before it is acted on), nodes/<id>/task.json
// (written before the task is published, so a resumed run republishes the
// same task and the dispatcher answers it from the results stream rather
// than running it twice), nodes/<id>/result.json and phase0_plan.json, and
// the result cache, keyed by the content of a task and the workers'
// toolchains.
package engine
