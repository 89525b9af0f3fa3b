// Package search grows the experiment tree: a Policy chooses what to
// expand (drafts first, then debugging a buggy leaf with probability
// debug_prob within max_debug_depth, else improving the best node), and Run
// keeps every worker slot busy: whenever a node finishes, the next one is
// chosen with everything known so far and started, with no step barrier
// waiting for the slowest node (Async). Lockstep, the batch-and-wait
// behaviour of step-synchronous searches, is there to measure against. A
// node that fails to run is buggy with its reason; the search goes on.
//
// A tree opened with OpenTree journals every state change before acting on
// it, so that a run killed at any moment resumes: finished nodes are kept,
// unfinished ones run first. CacheKey and Cache give node runs a content
// address, so that an identical node reuses an earlier result.
package search
