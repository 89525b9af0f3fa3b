// Package cluster is the cluster backend of pkg/memory: Redis holds what
// every write must see at once and every read is served from (branches,
// the run's seq counter, core versions, recall events and summaries, the
// fact hashes that dedup archival writes, the archival texts with their
// repeats, and their term index for BM25 search); ClickHouse holds the
// archival texts, their repeats and a mirror of recall events, for SQL. Everything is namespaced by run id ("hpcq:{<run>}:" in Redis,
// the run column in ClickHouse), so runs never see each other.
//
// A write is one atomic Lua script (write.lua): it takes the next seqs,
// checks the fact hash against the writer's visible scope, writes, and
// records its result under its write id, so that applying it again returns
// the first result and changes nothing. Every write is first appended to a
// local spool (internal/journal). When Redis cannot be reached, writes
// wait in the spool (fsync'd one by one) and are replayed in order when it
// is back; reads fail with ErrUnavailable meanwhile. ClickHouse rows are
// shipped in batches from the spool; a failed batch is retried, and the
// ReplacingMergeTree tables fold the rows a retry stored twice (OPTIMIZE
// ... FINAL runs after one). A write is acknowledged once Redis has
// applied it or the spool holds it; the spool is emptied when everything
// in it is in both servers, and Open replays what a crash left there.
//
// Visibility is the same as in the SQLite store: a branch's scope is the
// list of (branch, max seq) pairs of its path to the root, fixed at fork
// time and cached; every read is bounded by it (ZRANGEBYSCORE per scope
// entry, one pipeline; a prompt's core, summary and window are one
// pipeline together, as are the summary and the seqs the check after a
// recall append needs). No read goes to ClickHouse: a read waits for this
// process's own earlier writes to reach Redis, and then sees every write
// any process has applied there, so several schedulers and workers never
// serve each other stale data.
package cluster
