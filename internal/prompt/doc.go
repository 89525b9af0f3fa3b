// Package prompt builds the prompts of hpcq's model calls and turns the
// replies into work. Build renders a prompt of a Kind (phase0, draft,
// debug, improve, hyperparam, ablation, execution_review, summary,
// parse_metrics) from embedded templates (templates/*.tmpl), in a plain or
// a with-memory variant, with the sections of the memory design in order.
// ParseArtifacts reads the
// phase_artifacts a code-writing reply carries and applies the checks a
// worker would (commands, workspace paths and sizes, metric patterns);
// Generate asks, handles the <memory_update> protocol through pkg/memory,
// and retries with the reason of each failure until a reply is usable or
// the retries are spent (the node is then buggy, with that reason).
package prompt
