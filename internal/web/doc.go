// Package web serves hpcq's dashboard and its JSON API over run
// directories: `scheduler serve` (finished runs, or runs going in other
// processes) and `scheduler run --http` (the run going in this process).
//
// Everything is read from the run directory (through internal/runview, so a run
// going elsewhere is shown as it goes), the results store (LLM calls and
// costs), the memory store (a node's branch) and the queue (the cluster
// panel), through functions the caller gives in Options. The events stream
// (/api/runs/{id}/events, server-sent events) reads the run directory
// every Options.Poll while someone watches and sends the nodes that
// changed.
//
// Security: a listener beyond loopback needs a token (HPCQ_HTTP_TOKEN);
// without one, only loopback Host headers are answered (no DNS
// rebinding). Every answer is redacted (Options.Secrets and memory.Redact)
// and the page builds its DOM from text, never from HTML. The API is read
// only. docs/api.md documents it.
package web
