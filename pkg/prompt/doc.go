// Package prompt turns model replies into work: ParseArtifacts reads the
// phase_artifacts a code-writing reply carries and applies the checks a
// worker would (commands, workspace paths and sizes, metric patterns);
// Generate asks, handles the <memory_update> protocol through pkg/memory,
// and retries with the reason of each failure until a reply is usable or
// the retries are spent (the node is then buggy, with that reason).
package prompt
