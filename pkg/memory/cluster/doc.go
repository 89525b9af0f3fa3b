// Package cluster is the cluster backend of pkg/memory: Redis holds what
// every write must see at once (branches, the run's seq counter, core
// versions, recall events and summaries, and the fact hashes that dedup
// archival writes); ClickHouse holds the archival texts, their term index
// for BM25 search, their repeats, and a mirror of recall events for
// analytics. Everything is namespaced by run id ("hpcq:{<run>}:" in Redis,
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
// time and cached; every read is bounded by it, in Redis (ZRANGEBYSCORE per
// scope entry, one pipeline) and in ClickHouse (a WHERE condition on
// (branch, seq)).
package cluster
