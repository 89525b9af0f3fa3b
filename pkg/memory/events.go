package memory

// The kinds of recall events hpcq writes (RecallEvent.Kind), in one place:
// the engine writes the node's own, the worker's executor those of its
// phases (or the scheduler for it), and the export and consolidation read
// them. Seed 001 names the kinds; "run_complete" and "*_failed" kinds of
// older runs are still read.
const (
	// Written by the engine.
	EventNodeCreated           = "node_created"            // the node, its kind and parent
	EventMemoryContextInjected = "memory_context_injected" // what a prompt was told of the memory
	EventCodeGenerated         = "code_generated"          // the files the model wrote
	EventResourcesRefreshed    = "resources_refreshed"     // resources.yaml read again
	EventPlotGenerated         = "plot_generated"          // a plot came home
	EventNodeResult            = "node_result"             // how the node ended

	// Written for the executor's phases.
	EventPhaseStarted       = "phase_started"
	EventPhaseComplete      = "phase_complete"
	EventErrorEncountered   = "error_encountered"
	EventExecutionResult    = "execution_result"
	EventCompileDiagnostics = "compile_diagnostics"
	EventOutputsMissing     = "outputs_missing"
	EventOutputsFound       = "outputs_found"
	EventMetricExtracted    = "metric_extracted"
	EventMetricsBad         = "metrics_bad"

	// eventRunComplete is read in runs written before the phases' kinds.
	eventRunComplete = "run_complete"
)
