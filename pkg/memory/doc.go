// Package memory is hpcq's hierarchical memory of a run, MemGPT-style:
// core (key -> value with importance and TTL), recall (a timeline of events
// with a running summary) and archival (unlimited tagged texts with ranked
// full-text search), for a tree of branches.
//
// # Branches
//
// Every node has a branch. Fork is O(1) and copies nothing: it records the
// parent and the run-wide sequence number at the fork. Every write gets the
// next seq. A branch sees its own writes and, for each ancestor on its
// path, that ancestor's writes up to the seq at which the path forked from
// it. Siblings never see each other; a parent's later writes are invisible
// to its children. For core keys the nearest visible write wins: the
// branch's own, then its parent's, and so on; a delete is a tombstone.
//
// # Archival
//
// A text's fact hash is sha256 of its normalized form ([NormalizeFact]);
// its episode hash adds the branch and the context. Writing a fact that is
// already visible stores a repeat instead of a copy: the fact's count and
// last-seen rise, in the writer's scope only. Searches rank by [Rank]:
// BM25 relevance, raised by recency and frequency.
//
// # Backends
//
// [Store] is the persistence interface; pkg/memory/sqlite is the embedded
// backend and pkg/memory/cluster the Redis and ClickHouse one.
// pkg/memory/memorytest.Exercise is the conformance suite every backend
// passes. A store whose reads are round trips to a server reads what a
// prompt shows of a branch in one request ([ViewReader], [ReadView]). A
// run's whole memory moves between stores as [Rows], every write with its
// seq, so that each branch reads the same after the move.
package memory
