// Package results writes what a run produced into the tables users query
// with SQL (docs/results.md): runs, nodes, phase_runs, metrics and
// llm_calls, next to the memory's archival and recall_events. A local run
// keeps them in its SQLite file; a cluster run in ClickHouse. Both have the
// same tables with the same columns, so a query works on either.
package results
