package memory

import (
	"context"
	"errors"
	"time"
)

// Errors a Store returns; backends wrap them with detail.
var (
	// ErrNoBranch: the branch (or the parent of a fork) does not exist.
	ErrNoBranch = errors.New("memory: no such branch")
	// ErrBranchExists: Fork of an id that is already a branch.
	ErrBranchExists = errors.New("memory: branch exists")
	// ErrInvalid: a parameter is out of its range; the message names it.
	ErrInvalid = errors.New("memory: invalid parameter")
)

// Branch is one node's view of the memory. It is immutable once forked.
type Branch struct {
	ID string
	// Parent is "" for a root.
	Parent string
	// ForkSeq is the run-wide sequence number at the fork: the child sees
	// its parent's writes with seq <= ForkSeq.
	ForkSeq int64
	// Depth is 0 for a root.
	Depth   int
	Created time.Time
}

// CoreEntry is the visible value of a core key.
type CoreEntry struct {
	Key        string
	Value      string
	Importance int
	// Expires is zero when the entry has no TTL.
	Expires time.Time
	// Branch that wrote the entry (the branch itself or an ancestor).
	Branch  string
	Seq     int64
	Updated time.Time
}

// RecallEvent is one event of a branch's timeline.
type RecallEvent struct {
	Seq     int64
	TS      time.Time
	Kind    string
	NodeID  string
	Branch  string
	Phase   string
	Payload string
}

// RecallSummary is the running summary of the events folded out of a
// branch's window, up to FoldedSeq.
type RecallSummary struct {
	Text      string
	FoldedSeq int64
}

// ArchivalItem is a stored text and, from a search, its ranking.
type ArchivalItem struct {
	Seq         int64
	Branch      string
	Text        string
	Tags        []string
	Context     string
	FactHash    string
	EpisodeHash string
	// Count is how many times the fact was written in the reader's visible
	// scope; LastSeen when it was last written there.
	Count     int
	FirstSeen time.Time
	LastSeen  time.Time
	// BM25 is the text relevance (higher is better) and Score the final
	// rank of a search (see Rank).
	BM25  float64
	Score float64
}

// Params of the Store methods. Every call names its branch.
type (
	ForkParams struct {
		Branch string
		// Parent "" creates a root.
		Parent string
	}
	CoreSetParams struct {
		Branch     string
		Key        string
		Value      string
		Importance int // 1-5; 0 means the default, 3
		TTL        time.Duration
	}
	CoreKeyParams struct {
		Branch string
		Key    string
	}
	CoreListParams struct {
		Branch string
	}
	RecallAppendParams struct {
		Branch string
		Event  RecallEvent
	}
	RecallListParams struct {
		Branch string
		// AfterSeq lists only events with a larger seq.
		AfterSeq int64
		// Limit of events; Newest takes them from the end.
		Limit  int
		Newest bool
		// Total asks for the number of visible events after AfterSeq in
		// all (otherwise RecallList returns 0 for it).
		Total bool
	}
	RecallSearchParams struct {
		Branch string
		Query  string
		Limit  int
	}
	RecallSummarySetParams struct {
		Branch  string
		Summary RecallSummary
	}
	ArchivalWriteParams struct {
		Branch  string
		Text    string
		Tags    []string
		Context string
	}
	// ApplyParams are the writes of one <memory_update> block, applied in
	// one transaction: all or none. Branch fields inside are ignored.
	ApplyParams struct {
		Branch      string
		CoreSets    []CoreSetParams
		CoreDeletes []string
		Archival    []ArchivalWriteParams
	}
	ArchivalSearchParams struct {
		Branch string
		Query  string
		// Tags, when set, keeps items carrying every one of them.
		Tags []string
		K    int
	}
)

// Store persists the memory of a run. Every read sees exactly the branch's
// visible set: its own writes and, for each ancestor, the writes before the
// path forked from it, and every write the same Store acknowledged before
// the read (read-your-writes). Implementations are safe for concurrent use.
//
// A store may acknowledge a write before it has assigned its seq (the
// cluster store acknowledges once the write is in its local spool): the
// returned entry, event or item then has Seq 0, and ArchivalWrite reports
// dup false; the repeat is counted all the same when the write is applied.
// A Seq other than 0 is always the write's own.
type Store interface {
	Fork(ctx context.Context, p ForkParams) (Branch, error)
	BranchGet(ctx context.Context, id string) (Branch, error)

	CoreSet(ctx context.Context, p CoreSetParams) (CoreEntry, error)
	// CoreDelete writes a tombstone.
	CoreDelete(ctx context.Context, p CoreKeyParams) error
	// CoreGet returns the nearest visible live write of the key.
	CoreGet(ctx context.Context, p CoreKeyParams) (CoreEntry, bool, error)
	// CoreList returns every visible live key, by key.
	CoreList(ctx context.Context, p CoreListParams) ([]CoreEntry, error)

	RecallAppend(ctx context.Context, p RecallAppendParams) (RecallEvent, error)
	// RecallList returns visible events in seq order and, with Total, how
	// many visible events there are after AfterSeq in all.
	RecallList(ctx context.Context, p RecallListParams) ([]RecallEvent, int, error)
	RecallSearch(ctx context.Context, p RecallSearchParams) ([]RecallEvent, error)
	RecallSummaryGet(ctx context.Context, branch string) (RecallSummary, error)
	RecallSummarySet(ctx context.Context, p RecallSummarySetParams) error
	// RecallUnfolded returns the branch's running summary (as
	// RecallSummaryGet) and how many visible events come after its
	// FoldedSeq, counted no further than limit (limit: that many or more):
	// whether the recall window overflows, in one read.
	RecallUnfolded(ctx context.Context, branch string, limit int) (RecallSummary, int, error)

	// ArchivalWrite stores a text, or when the same fact is already visible,
	// records the repeat (dup is then true) and returns the stored item.
	ArchivalWrite(ctx context.Context, p ArchivalWriteParams) (item ArchivalItem, dup bool, err error)
	ArchivalSearch(ctx context.Context, p ArchivalSearchParams) ([]ArchivalItem, error)

	// Apply writes core sets, core deletes and archival texts atomically.
	Apply(ctx context.Context, p ApplyParams) error

	Close() error
}

// ViewParams names what [ReadView] reads of a branch.
type ViewParams struct {
	Branch string
	// Events is how many of the newest visible events to read (RecallList
	// with Newest and this Limit; 0: all of them).
	Events int
	// Core asks for the visible core entries (CoreList's) as well.
	Core bool
}

// A View is what a prompt shows of a branch besides its archival hits:
// its core entries (when asked), its running summary and its newest
// events, read together.
type View struct {
	Core    []CoreEntry
	Summary RecallSummary
	Events  []RecallEvent
}

// A ViewReader is a Store that reads a View in one request: the cluster
// store sends the three reads to Redis in one round trip instead of three.
// Its View returns what CoreList, RecallSummaryGet and RecallList (Newest,
// Limit p.Events) would.
type ViewReader interface {
	View(ctx context.Context, p ViewParams) (View, error)
}

// ReadView reads p's view of its branch from s: in one request when s is a
// [ViewReader], else by CoreList (when asked), RecallSummaryGet and
// RecallList.
func ReadView(ctx context.Context, s Store, p ViewParams) (View, error) {
	if r, ok := s.(ViewReader); ok {
		return r.View(ctx, p)
	}
	var v View
	var err error
	if p.Core {
		if v.Core, err = s.CoreList(ctx, CoreListParams{Branch: p.Branch}); err != nil {
			return View{}, err
		}
	}
	if v.Summary, err = s.RecallSummaryGet(ctx, p.Branch); err != nil {
		return View{}, err
	}
	if v.Events, _, err = s.RecallList(ctx, RecallListParams{Branch: p.Branch, Limit: p.Events, Newest: true}); err != nil {
		return View{}, err
	}
	return v, nil
}
