// Package run holds what a `scheduler run` is made of. Spec is its
// run.yaml: the research idea, the metric and its direction, the four
// stages, the search, LLM (model, prices, budget), Phase 1, memory and
// limits settings, with defaults for what is left out and an error naming
// the field for what is wrong (unknown keys included, with their line).
package run
