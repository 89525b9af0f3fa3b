package memory

import "time"

// Rows are every write of a run's memory with its seq, in seq order within
// each kind: what moving a run's memory from one store to another carries
// (a cluster run's memory moved out of Redis into its run directory).
// Everything a read can see is in them; what a store derives (indexes,
// dedup maps, BM25 statistics) is rebuilt from them.
type Rows struct {
	Branches []Branch
	// Core holds every version of every key, tombstones included.
	Core      []CoreVersion
	Recall    []RecallEvent
	Summaries []SummaryVersion
	// Archival holds the texts as written (Count, LastSeen, BM25 and Score
	// are a reader's, and zero here).
	Archival []ArchivalItem
	Hits     []ArchivalHit
}

// CoreVersion is one write of a core key: a set, or a tombstone (Deleted).
type CoreVersion struct {
	CoreEntry
	Deleted bool
}

// SummaryVersion is one write of a branch's running recall summary.
type SummaryVersion struct {
	Seq     int64
	Branch  string
	Summary RecallSummary
}

// ArchivalHit is a repeat of the archival text Target, written in Branch.
type ArchivalHit struct {
	Seq    int64
	Branch string
	Target int64
	TS     time.Time
}
